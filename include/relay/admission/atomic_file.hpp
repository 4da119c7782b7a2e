// Replacing a small file so that a crash at any moment leaves either the old
// contents or the new ones, never a mix or a truncated file.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace relay::admission {

// Writes `contents` to "<path>.tmp" in the same directory, fsyncs it, renames
// it over `path` (atomic on POSIX file systems) and fsyncs the directory so the
// rename itself survives a power loss. On failure the temporary file is
// removed and `path` is untouched; the result is a message naming the file,
// the step and the system error. nullopt on success. Blocking: call it off the
// event loops.
std::optional<std::string> replaceFileAtomically(const std::string& path,
                                                 std::string_view contents);

struct FileRead {
  bool found = false;    // false: the file does not exist (ENOENT)
  std::string contents;  // when found
  std::string error;     // non-empty: it exists but could not be read
};

FileRead readWholeFile(const std::string& path);

}  // namespace relay::admission
