// Reading whole input files safely: a path that is not a regular file (a directory, a FIFO,
// a device) is an error naming the path, checked on the opened descriptor before any read,
// so that a FIFO without a writer cannot hang the reader.
#pragma once
#include <string>

#include "ds/status.h"

namespace ds {

// Opens `path` read-only without blocking (O_NONBLOCK, so that opening a FIFO returns at
// once) and checks that it is a regular file. Returns the descriptor, blocking mode restored.
Result<int> open_regular_file(const std::string& path);

// The whole content of a regular file.
Result<std::string> read_regular_file(const std::string& path);

}  // namespace ds
