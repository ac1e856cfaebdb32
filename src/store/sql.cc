#include "store/sql.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace gpool::store {

namespace {
const std::string& emptyString() {
  static const auto* empty = new std::string();
  return *empty;
}
}  // namespace

SqlRow::SqlRow(std::vector<std::optional<std::string>> values) {
  cells_.resize(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if (!values[i]) continue;
    cells_[i].kind = Kind::kText;
    cells_[i].text = std::move(*values[i]);
    cells_[i].has_text = true;
  }
}

void SqlRow::addInteger(int64_t v) {
  Cell& c = cells_.emplace_back();
  c.kind = Kind::kInteger;
  c.integer = v;
}

void SqlRow::addReal(double v) {
  Cell& c = cells_.emplace_back();
  c.kind = Kind::kReal;
  c.real = v;
}

void SqlRow::addText(std::string_view v) {
  Cell& c = cells_.emplace_back();
  c.kind = Kind::kText;
  c.text.assign(v);
  c.has_text = true;
}

const std::string& SqlRow::text(size_t i) const {
  const Cell& c = cells_.at(i);
  if (c.kind == Kind::kNull) return emptyString();
  if (!c.has_text) {
    if (c.kind == Kind::kInteger) {
      c.text = std::to_string(c.integer);
    } else {
      // SQLite's own rendering of a real (up to 15 significant digits, as its text() does).
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.15g", c.real);
      c.text = buf;
    }
    c.has_text = true;
  }
  return c.text;
}

std::string SqlRow::takeText(size_t i) {
  if (cells_.at(i).kind == Kind::kText) {
    cells_[i].has_text = false;
    cells_[i].kind = Kind::kNull;
    return std::move(cells_[i].text);
  }
  return text(i);
}

int64_t SqlRow::integer(size_t i) const {
  const Cell& c = cells_.at(i);
  switch (c.kind) {
    case Kind::kNull: return 0;
    case Kind::kInteger: return c.integer;
    case Kind::kReal: return static_cast<int64_t>(c.real);
    case Kind::kText: break;
  }
  int64_t out = 0;
  std::from_chars(c.text.data(), c.text.data() + c.text.size(), out);
  return out;
}

double SqlRow::real(size_t i) const {
  const Cell& c = cells_.at(i);
  switch (c.kind) {
    case Kind::kNull: return 0;
    case Kind::kInteger: return static_cast<double>(c.integer);
    case Kind::kReal: return c.real;
    case Kind::kText: break;
  }
  return std::strtod(c.text.c_str(), nullptr);
}

std::optional<int64_t> SqlRow::optInteger(size_t i) const {
  if (isNull(i)) return std::nullopt;
  return integer(i);
}

}  // namespace gpool::store
