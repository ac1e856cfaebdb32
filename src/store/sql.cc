#include "store/sql.h"

#include <charconv>
#include <cstdlib>

namespace gpool::store {

namespace {
const std::string& emptyString() {
  static const auto* empty = new std::string();
  return *empty;
}
}  // namespace

const std::string& SqlRow::text(size_t i) const {
  const auto& v = values_.at(i);
  return v ? *v : emptyString();
}

int64_t SqlRow::integer(size_t i) const {
  const auto& v = values_.at(i);
  if (!v) return 0;
  int64_t out = 0;
  std::from_chars(v->data(), v->data() + v->size(), out);
  return out;
}

double SqlRow::real(size_t i) const {
  const auto& v = values_.at(i);
  if (!v) return 0;
  return std::strtod(v->c_str(), nullptr);
}

std::optional<int64_t> SqlRow::optInteger(size_t i) const {
  if (isNull(i)) return std::nullopt;
  return integer(i);
}

}  // namespace gpool::store
