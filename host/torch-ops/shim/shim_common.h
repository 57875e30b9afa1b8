// Helpers every shim source uses: C++ exceptions become an error code and a
// malloc'd message, tensors cross the C ABI as `at::Tensor*`.
#ifndef SKYRL_SHIM_COMMON_H
#define SKYRL_SHIM_COMMON_H

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace skyrl_shim {

inline char* dup_message(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p != nullptr) {
    std::memcpy(p, s.data(), s.size());
    p[s.size()] = '\0';
  }
  return p;
}

inline int fail(char** err, const std::string& message) {
  if (err != nullptr) {
    *err = dup_message(message);
  }
  return 1;
}

// Runs f; any C++ exception becomes an error code plus message.
template <class F>
inline int guard(char** err, F&& f) {
  try {
    f();
    return 0;
  } catch (const c10::Error& e) {
    return fail(err, e.what_without_backtrace());
  } catch (const std::exception& e) {
    return fail(err, e.what());
  } catch (...) {
    return fail(err, "unknown C++ exception");
  }
}

inline std::vector<at::Tensor> tensors(const void* const* ptrs, size_t n) {
  std::vector<at::Tensor> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(*static_cast<const at::Tensor*>(ptrs[i]));
  }
  return out;
}

inline const at::Tensor& tensor_ref(const void* p) { return *static_cast<const at::Tensor*>(p); }

inline void* give(at::Tensor t) { return new at::Tensor(std::move(t)); }

}  // namespace skyrl_shim

#endif
