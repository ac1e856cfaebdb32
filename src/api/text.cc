#include "api/text.h"

#include <cstdint>

namespace gpool::api {
namespace {

constexpr uint32_t kInvalid = 0xFFFFFFFF;

// Decodes the UTF-8 sequence at `text[*i]` and advances *i past it; kInvalid (advancing one
// byte) for a byte that does not start a well-formed sequence.
uint32_t decode(std::string_view text, size_t* i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(*i);
  size_t len = c < 0x80             ? 1
               : (c & 0xE0) == 0xC0 ? 2
               : (c & 0xF0) == 0xE0 ? 3
               : (c & 0xF8) == 0xF0 ? 4
                                    : 0;
  if (len == 0 || *i + len > text.size()) {
    ++*i;
    return kInvalid;
  }
  uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t k = 1; k < len; ++k) {
    if ((byte(*i + k) & 0xC0) != 0x80) {
      ++*i;
      return kInvalid;
    }
    cp = (cp << 6) | (byte(*i + k) & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    ++*i;
    return kInvalid;
  }
  *i += len;
  return cp;
}

// `value` in `digits` hexadecimal digits (at least), upper or lower case.
std::string hex(uint32_t value, int digits, bool upper) {
  const char* set = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  while (value != 0 || static_cast<int>(out.size()) < digits) {
    out.insert(out.begin(), set[value & 0xF]);
    value >>= 4;
  }
  return out;
}

bool isControl(uint32_t cp) {
  return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F);
}

bool isHiddenFormat(uint32_t cp) {
  return cp == 0x061C || cp == 0x200B || cp == 0x200E || cp == 0x200F ||
         (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2060 && cp <= 0x2064) ||
         (cp >= 0x2066 && cp <= 0x206F) || cp == 0xFEFF || (cp >= 0xFFF9 && cp <= 0xFFFB) ||
         (cp >= 0xE0000 && cp <= 0xE007F);
}

}  // namespace

std::string firstUnsafeChar(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = decode(text, &i);
    if (cp == kInvalid) return "U+FFFD (not UTF-8)";
    if (isControl(cp) || isHiddenFormat(cp)) return "U+" + hex(cp, 4, true);
  }
  return "";
}

Status validateDisplayText(std::string_view text, std::string_view field) {
  std::string bad = firstUnsafeChar(text);
  if (bad.empty()) return Status::ok();
  return Status::invalidArgument(std::string(field) + ": contains " + bad +
                                 " (a control or invisible formatting character), which names "
                                 "may not hold");
}

std::string escapeForTerminal(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t start = i;
    uint32_t cp = decode(text, &i);
    if (cp == kInvalid) {
      out += "\\x" + hex(static_cast<unsigned char>(text[start]), 2, false);
    } else if (isControl(cp)) {
      switch (cp) {
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case 0x1B: out += "\\e"; break;
        case 0x07: out += "\\a"; break;
        case 0x08: out += "\\b"; break;
        default: out += "\\x" + hex(cp, 2, false); break;
      }
    } else if (isHiddenFormat(cp)) {
      out += (cp <= 0xFFFF ? "\\u" + hex(cp, 4, false) : "\\U" + hex(cp, 8, false));
    } else {
      out.append(text.substr(start, i - start));
    }
  }
  return out;
}

}  // namespace gpool::api
