#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

// Base64 (RFC 4648). The standard alphabet with padding (section 4) carries bytes inside JSON
// (the agent protocol's `log_data`); the URL alphabet without padding (section 5) makes API
// token secrets. Pure functions, thread-safe.
namespace gpool {

// "A-Za-z0-9+/" with '=' padding to a multiple of 4 characters.
std::string base64Encode(std::string_view bytes);
// "A-Za-z0-9-_" without padding.
std::string base64UrlEncode(std::string_view bytes);

// Decodes standard base64 with padding (no whitespace). InvalidArgument naming the offset of
// the first character that is not base64, or a length that is not a multiple of 4.
Result<std::string> base64Decode(std::string_view text);

}  // namespace gpool
