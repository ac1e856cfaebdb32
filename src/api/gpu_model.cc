#include "api/gpu_model.h"

#include <algorithm>
#include <cctype>

namespace gpool::api {

namespace {

bool isMemoryWord(std::string_view w) {
  // "80gb", "16g", "24gib"
  size_t digits = 0;
  while (digits < w.size() && std::isdigit(static_cast<unsigned char>(w[digits])))
    ++digits;
  std::string_view unit = w.substr(digits);
  return digits > 0 && (unit == "gb" || unit == "g" || unit == "gib");
}

std::string upper(std::string s) {
  for (char& c : s)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::vector<std::string> gpuModelWords(std::string_view name) {
  std::vector<std::string> words;
  std::string word;
  auto flush = [&] {
    if (!word.empty() && word != "nvidia" && word != "(simulated)") words.push_back(word);
    word.clear();
  };
  for (char c : name) {
    if (c == ' ' || c == '-' || c == '_' || c == '\t') {
      flush();
    } else {
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  flush();
  return words;
}

bool gpuModelMatches(std::string_view wanted, std::string_view model) {
  if (wanted == model && !wanted.empty()) return true;
  const std::vector<std::string> want = gpuModelWords(wanted);
  if (want.empty()) return false;
  const std::vector<std::string> have = gpuModelWords(model);
  size_t at = 0;
  for (const std::string& w : want) {
    while (at < have.size() && have[at] != w)
      ++at;
    if (at == have.size()) return false;
    ++at;
  }
  return true;
}

std::vector<std::string> matchingGpuModels(const std::vector<std::string>& wanted,
                                           const std::set<std::string>& models) {
  std::vector<std::string> out;
  for (const std::string& model : models) {
    if (std::any_of(wanted.begin(), wanted.end(),
                    [&](const std::string& w) { return gpuModelMatches(w, model); })) {
      out.push_back(model);
    }
  }
  return out;
}

std::vector<std::string> gpuModelNames(std::string_view model) {
  const std::vector<std::string> words = gpuModelWords(model);
  if (words.empty()) return {};
  // The family: the first word with a digit ("a100" of "a100 sxm4 80gb", "a6000" of "rtx
  // a6000"), with the words before it ("rtx a6000").
  size_t family = 0;
  while (family < words.size() &&
         std::none_of(words[family].begin(), words[family].end(),
                      [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    ++family;
  }
  if (family == words.size()) family = words.size() - 1;
  std::vector<std::string> names;
  auto add = [&](const std::vector<std::string>& ws, const char* sep) {
    std::string name;
    for (size_t i = 0; i < ws.size(); ++i)
      name += (i ? sep : "") + upper(ws[i]);
    if (!name.empty() && std::find(names.begin(), names.end(), name) == names.end())
      names.push_back(name);
  };
  add({words[family]}, "-");
  auto memory = std::find_if(words.begin() + static_cast<std::ptrdiff_t>(family), words.end(),
                             [](const std::string& w) { return isMemoryWord(w); });
  if (memory != words.end()) add({words[family], *memory}, "-");
  std::vector<std::string> rest(words.begin() + static_cast<std::ptrdiff_t>(family), words.end());
  add(rest, "-");
  if (family > 0) add(words, " ");
  return names;
}

}  // namespace gpool::api
