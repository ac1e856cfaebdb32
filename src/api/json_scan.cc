#include <locale.h>
#include <stdlib.h>

#include <cmath>
#include <string>
#include <string_view>

#include "api/json_reader.h"

// A validating scanner for JSON text that builds nothing: no tokens, no values, no recursion.
// It accepts exactly what nlohmann::json::accept accepts (tests/api/json_scan_test.cc compares
// the two on hand-written and on randomly mutated documents), at a fraction of the cost, for
// the places that only need to know that stored text is sound before splicing it into a
// response (store::apiJobJsonText).
namespace gpool::api {
namespace {

class Scanner {
 public:
  explicit Scanner(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {
    // nlohmann skips one UTF-8 byte order mark before the first token; so does this.
    if (text.substr(0, 3) == "\xEF\xBB\xBF") p_ += 3;
  }

  // One JSON object followed only by whitespace.
  bool objectDocument() {
    skipSpace();
    if (p_ == end_ || *p_ != '{') return false;
    if (!value()) return false;
    skipSpace();
    return p_ == end_;
  }

 private:
  void skipSpace() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r'))
      ++p_;
  }

  // One value of any type, nested containers included; iterative, so the depth is bounded
  // only by memory (as in nlohmann's parser).
  bool value() {
    std::string open;  // the containers entered, innermost last: '{' or '['
    for (;;) {
      skipSpace();
      if (p_ == end_) return false;
      bool entered = false;
      switch (*p_) {
        case '{':
          ++p_;
          skipSpace();
          if (p_ != end_ && *p_ == '}') {
            ++p_;
          } else {
            open.push_back('{');
            if (!memberKey()) return false;
            entered = true;
          }
          break;
        case '[':
          ++p_;
          skipSpace();
          if (p_ != end_ && *p_ == ']') {
            ++p_;
          } else {
            open.push_back('[');
            entered = true;
          }
          break;
        case '"':
          if (!string()) return false;
          break;
        case 't':
          if (!literal("true")) return false;
          break;
        case 'f':
          if (!literal("false")) return false;
          break;
        case 'n':
          if (!literal("null")) return false;
          break;
        default:
          if (!number()) return false;
      }
      if (entered) continue;  // the container's first value comes next
      // A value ended: close what it ends, or move on to the next value of its container.
      for (;;) {
        if (open.empty()) return true;
        skipSpace();
        if (p_ == end_) return false;
        if (*p_ == ',') {
          ++p_;
          if (open.back() == '{' && !memberKey()) return false;
          break;
        }
        if (*p_ != (open.back() == '{' ? '}' : ']')) return false;
        ++p_;
        open.pop_back();
      }
    }
  }

  // `"key" :` of an object member.
  bool memberKey() {
    skipSpace();
    if (p_ == end_ || *p_ != '"' || !string()) return false;
    skipSpace();
    if (p_ == end_ || *p_ != ':') return false;
    ++p_;
    return true;
  }

  bool literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word)
      return false;
    p_ += word.size();
    return true;
  }

  bool digits() {
    const char* start = p_;
    while (p_ != end_ && *p_ >= '0' && *p_ <= '9')
      ++p_;
    return p_ != start;
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, and finite as a double: nlohmann rejects a
  // number that overflows one ("1e400"), so this does too.
  bool number() {
    const char* start = p_;
    if (!numberSyntax()) return false;
    // Only an exponent or more than 300 digits can reach DBL_MAX (about 1.8e308).
    bool could_overflow = p_ - start > 300;
    for (const char* c = start; c != p_ && !could_overflow; ++c)
      could_overflow = *c == 'e' || *c == 'E';
    if (!could_overflow) return true;
    // strtod in the C locale (its decimal point is '.' whatever the process's locale is).
    static const locale_t c_locale = newlocale(LC_ALL_MASK, "C", static_cast<locale_t>(nullptr));
    std::string token(start, p_);
    return std::isfinite(strtod_l(token.c_str(), nullptr, c_locale));
  }

  bool numberSyntax() {
    if (p_ != end_ && *p_ == '-') ++p_;
    if (p_ == end_) return false;
    if (*p_ == '0') {
      ++p_;
    } else if (*p_ < '1' || *p_ > '9' || !digits()) {
      return false;
    }
    if (p_ != end_ && *p_ == '.') {
      ++p_;
      if (!digits()) return false;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (!digits()) return false;
    }
    return true;
  }

  // Four hex digits of a \u escape.
  bool hex4(unsigned* code) {
    if (end_ - p_ < 4) return false;
    unsigned v = 0;
    for (int i = 0; i < 4; ++i, ++p_) {
      char c = *p_;
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= static_cast<unsigned>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v |= static_cast<unsigned>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v |= static_cast<unsigned>(c - 'A' + 10);
      } else {
        return false;
      }
    }
    *code = v;
    return true;
  }

  // The byte at p_ + i as unsigned, when it is in [lo, hi].
  bool byteIn(ptrdiff_t i, unsigned lo, unsigned hi) const {
    if (end_ - p_ <= i) return false;
    auto b = static_cast<unsigned char>(p_[i]);
    return b >= lo && b <= hi;
  }

  // One multi-byte UTF-8 sequence at p_ (RFC 3629: no overlong forms, no surrogates, nothing
  // above U+10FFFF).
  bool utf8Sequence() {
    auto lead = static_cast<unsigned char>(*p_);
    int length = 0;
    bool ok = false;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
      ok = byteIn(1, 0x80, 0xBF);
    } else if (lead == 0xE0) {
      length = 3;
      ok = byteIn(1, 0xA0, 0xBF) && byteIn(2, 0x80, 0xBF);
    } else if ((lead >= 0xE1 && lead <= 0xEC) || lead == 0xEE || lead == 0xEF) {
      length = 3;
      ok = byteIn(1, 0x80, 0xBF) && byteIn(2, 0x80, 0xBF);
    } else if (lead == 0xED) {
      length = 3;
      ok = byteIn(1, 0x80, 0x9F) && byteIn(2, 0x80, 0xBF);
    } else if (lead == 0xF0) {
      length = 4;
      ok = byteIn(1, 0x90, 0xBF) && byteIn(2, 0x80, 0xBF) && byteIn(3, 0x80, 0xBF);
    } else if (lead >= 0xF1 && lead <= 0xF3) {
      length = 4;
      ok = byteIn(1, 0x80, 0xBF) && byteIn(2, 0x80, 0xBF) && byteIn(3, 0x80, 0xBF);
    } else if (lead == 0xF4) {
      length = 4;
      ok = byteIn(1, 0x80, 0x8F) && byteIn(2, 0x80, 0xBF) && byteIn(3, 0x80, 0xBF);
    }
    if (ok) p_ += length;
    return ok;
  }

  // A string at its opening quote.
  bool string() {
    ++p_;
    while (p_ != end_) {
      auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c < 0x20) return false;
      if (c < 0x80 && c != '\\') {
        ++p_;
        continue;
      }
      if (c >= 0x80) {
        if (!utf8Sequence()) return false;
        continue;
      }
      ++p_;  // the backslash
      if (p_ == end_) return false;
      char e = *p_++;
      if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
          e == 't') {
        continue;
      }
      if (e != 'u') return false;
      unsigned code = 0;
      if (!hex4(&code)) return false;
      if (code >= 0xDC00 && code <= 0xDFFF) return false;  // a low surrogate alone
      if (code >= 0xD800 && code <= 0xDBFF) {              // must pair with a low one
        if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
        p_ += 2;
        unsigned low = 0;
        if (!hex4(&low) || low < 0xDC00 || low > 0xDFFF) return false;
      }
    }
    return false;
  }

  const char* p_;
  const char* end_;
};

}  // namespace

bool isJsonObjectText(std::string_view text) {
  return Scanner(text).objectDocument();
}

}  // namespace gpool::api
