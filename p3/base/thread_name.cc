#include "p3/base/thread_name.h"

#include <pthread.h>

#include <string>

namespace p3 {

bool NameThisThread(absl::string_view name) {
  const std::string cut(name.substr(0, kMaxThreadNameBytes));
  return pthread_setname_np(pthread_self(), cut.c_str()) == 0;
}

std::string ThisThreadName() {
  char name[kMaxThreadNameBytes + 1] = {};
  if (pthread_getname_np(pthread_self(), name, sizeof(name)) != 0) return "";
  return name;
}

}  // namespace p3
