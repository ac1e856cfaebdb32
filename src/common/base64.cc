#include "common/base64.h"

#include <array>
#include <cstdint>

namespace gpool {

namespace {

constexpr char kStandard[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr char kUrl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string encode(std::string_view bytes, const char* alphabet, bool pad) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  auto byte = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(bytes[k])); };
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = (byte(i) << 16) | (byte(i + 1) << 8) | byte(i + 2);
    out.push_back(alphabet[(v >> 18) & 63]);
    out.push_back(alphabet[(v >> 12) & 63]);
    out.push_back(alphabet[(v >> 6) & 63]);
    out.push_back(alphabet[v & 63]);
  }
  size_t rest = bytes.size() - i;
  if (rest == 0) return out;
  uint32_t v = byte(i) << 16;
  if (rest == 2) v |= byte(i + 1) << 8;
  out.push_back(alphabet[(v >> 18) & 63]);
  out.push_back(alphabet[(v >> 12) & 63]);
  if (rest == 2) out.push_back(alphabet[(v >> 6) & 63]);
  if (pad) out.append(rest == 1 ? "==" : "=");
  return out;
}

// The value of each standard-alphabet character, -1 for the rest.
constexpr std::array<int8_t, 256> decodeTable() {
  std::array<int8_t, 256> table{};
  for (int8_t& v : table)
    v = -1;
  for (int k = 0; k < 64; ++k)
    table[static_cast<unsigned char>(kStandard[k])] = static_cast<int8_t>(k);
  return table;
}

}  // namespace

std::string base64Encode(std::string_view bytes) {
  return encode(bytes, kStandard, true);
}

std::string base64UrlEncode(std::string_view bytes) {
  return encode(bytes, kUrl, false);
}

Result<std::string> base64Decode(std::string_view text) {
  static constexpr std::array<int8_t, 256> kTable = decodeTable();
  if (text.size() % 4 != 0) {
    return Status::invalidArgument("base64: length " + std::to_string(text.size()) +
                                   " is not a multiple of 4");
  }
  size_t padding = 0;
  if (!text.empty() && text.back() == '=')
    padding = text.size() >= 2 && text[text.size() - 2] == '=' ? 2 : 1;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  uint32_t v = 0;
  for (size_t k = 0; k < text.size() - padding; ++k) {
    int8_t d = kTable[static_cast<unsigned char>(text[k])];
    if (d < 0) {
      return Status::invalidArgument("base64: character " + std::to_string(k) +
                                     " is not in the base64 alphabet");
    }
    v = (v << 6) | static_cast<uint32_t>(d);
    if (k % 4 == 3) {
      out.push_back(static_cast<char>((v >> 16) & 0xFF));
      out.push_back(static_cast<char>((v >> 8) & 0xFF));
      out.push_back(static_cast<char>(v & 0xFF));
      v = 0;
    }
  }
  if (padding == 1) {  // 3 characters: 18 bits, 2 bytes
    out.push_back(static_cast<char>((v >> 10) & 0xFF));
    out.push_back(static_cast<char>((v >> 2) & 0xFF));
  } else if (padding == 2) {  // 2 characters: 12 bits, 1 byte
    out.push_back(static_cast<char>((v >> 4) & 0xFF));
  }
  return out;
}

}  // namespace gpool
