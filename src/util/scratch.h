// Per-thread scratch vectors keep their capacity from call to call, so that the tokenizer does
// not allocate per word. One huge input must not pin its peak for the life of the thread,
// though (an HTTP thread that once tokenized a 7 MiB word would otherwise hold ~270 MB of
// scratch for good): above kMaxKeptScratchBytes the buffer is freed after use.
#pragma once
#include <cstddef>
#include <vector>

namespace ds {

inline constexpr size_t kMaxKeptScratchBytes = size_t{1} << 20;

template <class T>
void release_large_scratch(std::vector<T>& v) {
  if (v.capacity() * sizeof(T) > kMaxKeptScratchBytes) std::vector<T>().swap(v);
}

}  // namespace ds
