#include "p3/core/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"

namespace p3 {
namespace {

constexpr size_t kPage = 4096;
constexpr char kMagic[8] = {'P', '3', 'S', 'H', 'M', 0, 0, 1};

struct Header {
  char magic[8];
  uint64_t nonce;
  int64_t num_floats;
};
static_assert(sizeof(Header) <= kPage);

size_t RoundUp(size_t n) { return (n + kPage - 1) / kPage * kPage; }
size_t FloatBytes(int64_t num_floats) { return RoundUp(static_cast<size_t>(num_floats) * 4); }

uint64_t RandomNonce() {
  std::random_device device;
  uint64_t nonce = 0;
  while (nonce == 0) nonce = (static_cast<uint64_t>(device()) << 32) ^ device();
  return nonce;
}

std::string Errno(const char* what, const std::string& name, int err) {
  return absl::StrCat("shared memory ", name, ": ", what, ": ", std::strerror(err));
}

}  // namespace

size_t SharedRegion::SizeFor(int64_t num_floats) { return kPage + 2 * FloatBytes(num_floats); }

SharedRegion::SharedRegion(std::string name, uint64_t nonce, int64_t num_floats, void* base,
                           size_t size, bool owner)
    : name_(std::move(name)),
      nonce_(nonce),
      num_floats_(num_floats),
      base_(base),
      size_(size),
      linked_(owner) {
  char* bytes = static_cast<char*>(base_);
  params_ = reinterpret_cast<float*>(bytes + kPage);
  grads_ = reinterpret_cast<float*>(bytes + kPage + FloatBytes(num_floats));
}

SharedRegion::~SharedRegion() {
  Unlink();
  munmap(base_, size_);
}

void SharedRegion::Unlink() {
  if (!linked_) return;
  linked_ = false;
  shm_unlink(name_.c_str());
}

absl::StatusOr<std::unique_ptr<SharedRegion>> SharedRegion::Create(int64_t num_floats) {
  if (num_floats < 1) return absl::InvalidArgumentError("shared memory: no parameters");
  static std::atomic<int> counter{0};
  const uint64_t nonce = RandomNonce();
  const std::string name = absl::StrCat("/p3-", getpid(), "-", counter++, "-",
                                        absl::Hex(nonce & 0xffffffff, absl::kZeroPad8));
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return absl::UnavailableError(Errno("cannot create", name, errno));
  const size_t size = SizeFor(num_floats);
  auto fail = [&](absl::Status status) {
    close(fd);
    shm_unlink(name.c_str());
    return status;
  };
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    return fail(absl::UnavailableError(Errno("cannot size", name, errno)));
  }
  // Reserve the pages now: tmpfs hands them out lazily, and a full /dev/shm would
  // otherwise show as SIGBUS on the first write to a missing page.
  if (const int err = posix_fallocate(fd, 0, static_cast<off_t>(size)); err != 0) {
    return fail(absl::ResourceExhaustedError(
        absl::StrCat(Errno("cannot reserve", name, err), " (", size >> 20,
                     " MiB needed in /dev/shm; in a container, raise --shm-size)")));
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int map_err = errno;
  close(fd);
  if (base == MAP_FAILED) {
    shm_unlink(name.c_str());
    return absl::UnavailableError(Errno("cannot map", name, map_err));
  }
  Header header;
  std::memcpy(header.magic, kMagic, sizeof(kMagic));
  header.nonce = nonce;
  header.num_floats = num_floats;
  std::memcpy(base, &header, sizeof(header));
  return std::unique_ptr<SharedRegion>(
      new SharedRegion(name, nonce, num_floats, base, size, /*owner=*/true));
}

absl::StatusOr<std::unique_ptr<SharedRegion>> SharedRegion::Open(const std::string& name,
                                                                  uint64_t nonce,
                                                                  int64_t num_floats) {
  if (name.size() < 2 || name[0] != '/' || name.find('/', 1) != std::string::npos ||
      name.size() > 200) {
    return absl::InvalidArgumentError(absl::StrCat("shared memory: bad name \"", name, "\""));
  }
  if (num_floats < 1) return absl::InvalidArgumentError("shared memory: no parameters");
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) {
      return absl::NotFoundError(absl::StrCat(
          "shared memory ", name, " does not exist here (the worker is on another machine?)"));
    }
    return absl::UnavailableError(Errno("cannot open", name, err));
  }
  const size_t size = SizeFor(num_floats);
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != size) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("shared memory ", name, " has ", st.st_size, " bytes, expected ", size));
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int map_err = errno;
  close(fd);
  if (base == MAP_FAILED) return absl::UnavailableError(Errno("cannot map", name, map_err));
  Header header;
  std::memcpy(&header, base, sizeof(header));
  if (std::memcmp(header.magic, kMagic, sizeof(kMagic)) != 0 || header.nonce != nonce ||
      header.num_floats != num_floats) {
    munmap(base, size);
    return absl::FailedPreconditionError(
        absl::StrCat("shared memory ", name, " is not the region offered (header mismatch)"));
  }
  return std::unique_ptr<SharedRegion>(
      new SharedRegion(name, nonce, num_floats, base, size, /*owner=*/false));
}

}  // namespace p3
