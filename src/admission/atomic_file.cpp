#include "relay/admission/atomic_file.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace relay::admission {
namespace {

std::string failure(std::string_view step, const std::string& file, int err) {
  std::string message(step);
  message += ' ' + file + ": " + std::strerror(err);
  return message;
}

std::string parentDirectory(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

bool writeAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

std::optional<std::string> replaceFileAtomically(const std::string& path,
                                                 std::string_view contents) {
  const std::string temp = path + ".tmp";
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return failure("cannot create", temp, errno);

  // Any failure from here on removes the temporary file, so a half-written one
  // is never left behind to be mistaken for state.
  auto abandon = [&](std::string_view step, int err) {
    std::string message = failure(step, temp, err);
    ::unlink(temp.c_str());
    return message;
  };
  if (!writeAll(fd, contents)) {
    const int err = errno;
    ::close(fd);
    return abandon("cannot write", err);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return abandon("cannot fsync", err);
  }
  if (::close(fd) != 0) return abandon("cannot close", errno);
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::string message = failure("cannot rename " + temp + " to", path, err);
    ::unlink(temp.c_str());
    return message;
  }

  // The rename is in place; fsyncing the directory makes it durable.
  const std::string dir = parentDirectory(path);
  const int dirFd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirFd < 0) return failure("cannot open directory", dir, errno);
  const int syncResult = ::fsync(dirFd);
  const int err = errno;
  ::close(dirFd);
  if (syncResult != 0) return failure("cannot fsync directory", dir, err);
  return std::nullopt;
}

FileRead readWholeFile(const std::string& path) {
  FileRead result;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) result.error = failure("cannot open", path, errno);
    return result;
  }
  result.found = true;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      result.error = failure("cannot read", path, errno);
      break;
    }
    result.contents.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return result;
}

}  // namespace relay::admission
