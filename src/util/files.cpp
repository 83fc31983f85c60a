// See files.h.
#include "util/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ds {

Result<int> open_regular_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Status::error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return Status::error(path + ": cannot stat: " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::error(path + ": not a regular file" + (S_ISDIR(st.st_mode) ? " (a directory)" : ""));
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

Result<std::string> read_regular_file(const std::string& path) {
  auto fd = open_regular_file(path);
  if (!fd) return fd.status();
  std::string out;
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(*fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(*fd);
      return Status::error(path + ": cannot read: " + std::strerror(e));
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(*fd);
  return out;
}

}  // namespace ds
