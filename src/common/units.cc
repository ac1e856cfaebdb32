#include "common/units.h"

#include <cctype>
#include <cstdio>
#include <string>

namespace gpool {

namespace {

std::string quote(std::string_view text) {
  return "'" + std::string(text) + "'";
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// Splits "24GiB" into number "24" and unit "GiB".
void splitNumberUnit(std::string_view text, std::string_view* number, std::string_view* unit) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
    ++i;
  }
  *number = text.substr(0, i);
  *unit = trim(text.substr(i));
}

// Strict unsigned integer of at most 18 digits.
bool parseSmallUint(std::string_view s, int64_t* out) {
  if (s.empty() || s.size() > 18) return false;
  int64_t v = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

std::string formatScaled(uint64_t scaled, int scale_digits) {
  uint64_t pow = 1;
  for (int i = 0; i < scale_digits; ++i)
    pow *= 10;
  std::string out = std::to_string(scaled / pow);
  uint64_t frac = scaled % pow;
  if (frac != 0) {
    std::string digits = std::to_string(frac);
    digits.insert(0, static_cast<size_t>(scale_digits) - digits.size(), '0');
    while (!digits.empty() && digits.back() == '0')
      digits.pop_back();
    out += "." + digits;
  }
  return out;
}

}  // namespace

Result<uint64_t> parseScaledDecimal(std::string_view text, int scale_digits, uint64_t max_scaled,
                                    std::string_view what) {
  const std::string_view original = text;
  text = trim(text);
  if (text.empty()) return Status::invalidArgument(std::string(what) + " is empty");
  if (text.front() == '-') {
    return Status::invalidArgument(std::string(what) + " " + quote(original) +
                                   " is negative; it must be >= 0");
  }
  if (text.front() == '+') text.remove_prefix(1);
  size_t dot = text.find('.');
  std::string_view int_part = text.substr(0, dot);
  std::string_view frac_part = dot == std::string_view::npos ? "" : text.substr(dot + 1);
  auto bad = [&](std::string_view why) {
    return Status::invalidArgument(std::string(what) + " " + quote(original) + " " +
                                   std::string(why));
  };
  if (int_part.empty() && frac_part.empty()) return bad("is not a number");
  if (dot != std::string_view::npos && frac_part.empty()) return bad("ends with '.'");
  for (char c : int_part) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return bad("is not a number");
  }
  for (char c : frac_part) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return bad("is not a number");
  }
  while (!frac_part.empty() && frac_part.back() == '0')
    frac_part.remove_suffix(1);
  if (static_cast<int>(frac_part.size()) > scale_digits) {
    return bad("has more precision than supported (" + std::to_string(scale_digits) +
               " decimal places at most)");
  }
  // Overflow guard: at most 19 significant digits fit a uint64 safely before the max check.
  while (int_part.size() > 1 && int_part.front() == '0')
    int_part.remove_prefix(1);
  if (int_part.size() + static_cast<size_t>(scale_digits) > 18) {
    return bad("is too large (at most " + formatScaled(max_scaled, scale_digits) + ")");
  }
  uint64_t value = 0;
  for (char c : int_part)
    value = value * 10 + static_cast<uint64_t>(c - '0');
  for (int i = 0; i < scale_digits; ++i) {
    value *= 10;
    if (static_cast<size_t>(i) < frac_part.size())
      value += static_cast<uint64_t>(frac_part[i] - '0');
  }
  if (value > max_scaled) {
    return bad("is too large (at most " + formatScaled(max_scaled, scale_digits) + ")");
  }
  return value;
}

Result<uint64_t> parseMemoryMiB(std::string_view text) {
  const std::string_view original = text;
  text = trim(text);
  std::string_view number, unit;
  splitNumberUnit(text, &number, &unit);
  // Multiplier to MiB, expressed with 3 decimal digits of scale so that "1.5G" is exact.
  uint64_t mib_per_unit;
  if (unit.empty() || iequals(unit, "M") || iequals(unit, "MB") || iequals(unit, "MiB") ||
      iequals(unit, "Mi")) {
    mib_per_unit = 1;
  } else if (iequals(unit, "G") || iequals(unit, "GB") || iequals(unit, "GiB") ||
             iequals(unit, "Gi")) {
    mib_per_unit = 1024;
  } else if (iequals(unit, "T") || iequals(unit, "TB") || iequals(unit, "TiB") ||
             iequals(unit, "Ti")) {
    mib_per_unit = 1024 * 1024;
  } else {
    return Status::invalidArgument("memory size " + quote(original) + " has unknown unit " +
                                   quote(unit) + " (use M, G or T, e.g. 24G or 512M)");
  }
  if (number.empty()) {
    return Status::invalidArgument("memory size " + quote(original) +
                                   " is not a number with a unit (e.g. 24G or 512M)");
  }
  GPOOL_ASSIGN_OR_RETURN(uint64_t milli_units,
                         parseScaledDecimal(number, 3, kMaxMemoryMiB * 1000, "memory size"));
  uint64_t milli_mib = milli_units * mib_per_unit;
  if (milli_mib % 1000 != 0) {
    return Status::invalidArgument("memory size " + quote(original) +
                                   " is not a whole number of MiB");
  }
  uint64_t mib = milli_mib / 1000;
  if (mib > kMaxMemoryMiB) {
    return Status::invalidArgument("memory size " + quote(original) +
                                   " is too large (at most 1024T)");
  }
  return mib;
}

std::string formatMemoryMiB(uint64_t mib) {
  if (mib != 0 && mib % (1024 * 1024) == 0) return std::to_string(mib / (1024 * 1024)) + "T";
  if (mib != 0 && mib % 1024 == 0) return std::to_string(mib / 1024) + "G";
  return std::to_string(mib) + "M";
}

Result<uint32_t> parseComputeShare(std::string_view text) {
  const std::string_view original = text;
  text = trim(text);
  uint64_t value;
  if (!text.empty() && text.back() == '%') {
    // Percent with up to one decimal: 12.5% = 125 thousandths.
    GPOOL_ASSIGN_OR_RETURN(
        value, parseScaledDecimal(text.substr(0, text.size() - 1), 1, UINT32_MAX, "compute share"));
  } else {
    GPOOL_ASSIGN_OR_RETURN(value, parseScaledDecimal(text, 3, UINT32_MAX, "compute share"));
  }
  if (value == 0 || value > kComputeWhole) {
    return Status::invalidArgument("compute share " + quote(original) +
                                   " is out of range (0%, 100%]; e.g. 0.25 or 25%");
  }
  return static_cast<uint32_t>(value);
}

std::string formatComputeShare(uint32_t thousandths) {
  return formatScaled(thousandths, 1) + "%";
}

Result<uint32_t> parseGpuCount(std::string_view text) {
  const std::string_view original = text;
  GPOOL_ASSIGN_OR_RETURN(
      uint64_t value, parseScaledDecimal(text, 3, uint64_t{kMaxGpusPerTask} * 1000, "GPU count"));
  if (value == 0) {
    return Status::invalidArgument("GPU count " + quote(original) +
                                   " is zero; ask for at least 0.001 GPU, or omit it");
  }
  if (value > 1000 && value % 1000 != 0) {
    return Status::invalidArgument("GPU count " + quote(original) +
                                   " mixes whole GPUs and a fraction; ask for whole GPUs (2) "
                                   "or a slice of one GPU (0.5)");
  }
  return static_cast<uint32_t>(value);
}

std::string formatGpuCount(uint32_t thousandths) {
  return formatScaled(thousandths, 3);
}

Result<uint64_t> parseCpuMillis(std::string_view text) {
  const std::string_view original = text;
  text = trim(text);
  uint64_t value;
  if (!text.empty() && (text.back() == 'm')) {
    GPOOL_ASSIGN_OR_RETURN(value, parseScaledDecimal(text.substr(0, text.size() - 1), 0,
                                                     1'000'000'000, "CPU millicores"));
  } else {
    GPOOL_ASSIGN_OR_RETURN(value, parseScaledDecimal(text, 3, 1'000'000'000, "CPU count"));
  }
  if (value == 0) {
    return Status::invalidArgument("CPU count " + quote(original) +
                                   " is zero; e.g. 8, 0.5 or 500m");
  }
  return value;
}

std::string formatCpuMillis(uint64_t millis) {
  return formatScaled(millis, 3);
}

Result<int64_t> parseDuration(std::string_view text) {
  const std::string_view original = text;
  text = trim(text);
  auto bad = [&](std::string_view why) {
    return Status::invalidArgument("duration " + quote(original) + " " + std::string(why) +
                                   " (use [days-]hh:mm:ss, or e.g. 90m, 2h, 1d12h)");
  };
  if (text.empty()) return bad("is empty");
  if (text.front() == '-') return bad("is negative");

  int64_t total = 0;
  const bool suffixed = std::isalpha(static_cast<unsigned char>(text.back()));
  if (suffixed) {
    // A sum of <number><unit> terms, units in descending order, each at most once.
    int last_rank = 5;
    size_t i = 0;
    while (i < text.size()) {
      size_t start = i;
      while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])))
        ++i;
      int64_t n;
      if (!parseSmallUint(text.substr(start, i - start), &n)) return bad("is malformed");
      if (i >= text.size()) return bad("has a number without a unit");
      char u = static_cast<char>(std::tolower(static_cast<unsigned char>(text[i++])));
      int rank;
      int64_t mult;
      switch (u) {
        case 'd':
          rank = 4;
          mult = 86400;
          break;
        case 'h':
          rank = 3;
          mult = 3600;
          break;
        case 'm':
          rank = 2;
          mult = 60;
          break;
        case 's':
          rank = 1;
          mult = 1;
          break;
        default: return bad("has unknown unit '" + std::string(1, u) + "'");
      }
      if (rank >= last_rank) return bad("repeats a unit or has units out of order");
      last_rank = rank;
      if (n > kMaxDurationSeconds / mult) return bad("is too long (at most 365 days)");
      total += n * mult;
    }
  } else {
    int64_t days = 0;
    std::string_view rest = text;
    size_t dash = text.find('-');
    const bool has_days = dash != std::string_view::npos;
    if (has_days) {
      if (!parseSmallUint(text.substr(0, dash), &days)) return bad("has a malformed day count");
      rest = text.substr(dash + 1);
    }
    int64_t parts[3];
    int count = 0;
    size_t pos = 0;
    while (true) {
      size_t colon = rest.find(':', pos);
      std::string_view piece =
          rest.substr(pos, colon == std::string_view::npos ? std::string_view::npos : colon - pos);
      if (count == 3 || !parseSmallUint(piece, &parts[count])) return bad("is malformed");
      ++count;
      if (colon == std::string_view::npos) break;
      pos = colon + 1;
    }
    // The leading field is unbounded (within the maximum); later fields are clock fields.
    int64_t h = 0, m = 0, s = 0;
    bool fields_ok = true;
    if (has_days) {
      h = parts[0];
      if (count > 1) m = parts[1];
      if (count > 2) s = parts[2];
      fields_ok = h <= 23 && m <= 59 && s <= 59;
    } else if (count == 1) {
      m = parts[0];  // Slurm: a bare number is minutes
    } else if (count == 2) {
      m = parts[0];
      s = parts[1];
      fields_ok = s <= 59;
    } else {
      h = parts[0];
      m = parts[1];
      s = parts[2];
      fields_ok = m <= 59 && s <= 59;
    }
    if (!fields_ok) {
      return bad("has a field out of range (hours 0-23 after days, minutes and seconds 0-59)");
    }
    if (days > 365 || h > kMaxDurationSeconds / 3600 || m > kMaxDurationSeconds / 60) {
      return bad("is too long (at most 365 days)");
    }
    total = days * 86400 + h * 3600 + m * 60 + s;
  }
  if (total > kMaxDurationSeconds) return bad("is too long (at most 365 days)");
  return total;
}

std::string formatDuration(int64_t seconds) {
  if (seconds < 0) seconds = 0;
  int64_t days = seconds / 86400;
  seconds %= 86400;
  char buf[48];
  if (days > 0) {
    std::snprintf(buf, sizeof buf, "%lld-%02lld:%02lld:%02lld", static_cast<long long>(days),
                  static_cast<long long>(seconds / 3600),
                  static_cast<long long>((seconds / 60) % 60),
                  static_cast<long long>(seconds % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld", static_cast<long long>(seconds / 3600),
                  static_cast<long long>((seconds / 60) % 60),
                  static_cast<long long>(seconds % 60));
  }
  return buf;
}

}  // namespace gpool
