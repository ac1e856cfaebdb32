#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

// GPU models as users name them. A driver names a GPU "NVIDIA A100-SXM4-80GB" (the fake backend
// adds " (simulated)"); users write "A100", "a100-80gb", "RTX A6000" or "A6000", as Slurm's
// gres types match a substring of the detected name. These functions decide which models such a
// name means, the same way at submission and in every scheduling pass.
//
// Thread-safety: pure functions.
namespace gpool::api {

// The words of a model name: lower case, split at spaces, '-' and '_', without the vendor
// ("nvidia") and without "(simulated)". "NVIDIA A100-SXM4-80GB (simulated)" -> a100 sxm4 80gb.
std::vector<std::string> gpuModelWords(std::string_view name);

// Whether `wanted` names `model`: every word of `wanted` is a word of the model, in the same
// order. "A100", "A100-80GB", "a100-sxm4-80gb", "NVIDIA A100-SXM4-80GB" and the full name all
// name "NVIDIA A100-SXM4-80GB (simulated)"; "A10" does not (words match whole), nor does
// "A100-40GB". A name without words names nothing.
bool gpuModelMatches(std::string_view wanted, std::string_view model);

// The models of `models` that any of `wanted` names, in the order of `models`.
std::vector<std::string> matchingGpuModels(const std::vector<std::string>& wanted,
                                           const std::set<std::string>& models);

// Names a user may give for `model`, shortest first and each naming it: its family ("A100"),
// family and memory ("A100-80GB") when the name has a memory word, and the name without vendor
// and suffix ("A100-SXM4-80GB"); upper case as drivers write them.
std::vector<std::string> gpuModelNames(std::string_view model);

}  // namespace gpool::api
