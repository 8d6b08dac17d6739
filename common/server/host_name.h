// This machine's host name (the pod name under Kubernetes): the default
// identity of workers in logs, registrations and delivered samples.
#ifndef KFORGE_COMMON_SERVER_HOST_NAME_H_
#define KFORGE_COMMON_SERVER_HOST_NAME_H_

#include <unistd.h>

#include <string>

namespace kforge {

inline std::string HostName() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

}  // namespace kforge

#endif  // KFORGE_COMMON_SERVER_HOST_NAME_H_
