#include "http/http_module.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "text/sanitize.hpp"

namespace gpureap {
namespace {

constexpr const char* kModuleName = "gpureap-http.so";

std::string executable_dir() {
  std::error_code error;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::string() : exe.parent_path().string();
}

}  // namespace

const gpureap_http_module_api* load_http_module(const std::string& module_path, std::string& error) {
  std::vector<std::string> candidates = module_path.empty() ? http_module_candidates() : std::vector{module_path};
  std::string tried;
  for (const auto& path : candidates) {
    if (::access(path.c_str(), F_OK) != 0) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = ::dlerror();
      error = "cannot load the HTTP module " + path + ": " + sanitize_for_terminal(why ? why : "unknown error") +
              " (it needs cpp-httplib 0.11 and OpenSSL 3: README.md, Install)";
      return nullptr;
    }
    using Entry = const gpureap_http_module_api* (*)();
    auto entry = reinterpret_cast<Entry>(::dlsym(handle, GPUREAP_HTTP_MODULE_ENTRY));
    const gpureap_http_module_api* api = entry ? entry() : nullptr;
    if (api == nullptr || api->abi != GPUREAP_HTTP_MODULE_ABI || std::strcmp(api->version, GPUREAP_VERSION) != 0) {
      error = "the HTTP module " + path + " belongs to another gpureap version (this is " + GPUREAP_VERSION +
              "): reinstall gpureap";
      return nullptr;
    }
    return api;
  }
  error = "the HTTP module " + std::string(kModuleName) + " is not installed (looked for " + tried +
          "): reinstall gpureap";
  return nullptr;
}

std::vector<std::string> http_module_candidates() {
  std::vector<std::string> out;
  const auto add = [&out](std::string path) {
    if (std::find(out.begin(), out.end(), path) == out.end()) out.push_back(std::move(path));
  };
  if (const std::string dir = executable_dir(); !dir.empty()) {
    add(dir + "/" + kModuleName);
    // The packages' library directories beside bin/ (cmake/packaging.cmake): the Debian
    // package's (this build's own), the RPM's and the tarball's.
    for (const char* libdir : {GPUREAP_INSTALL_LIBDIR, "lib64", "lib"}) {
      add((std::filesystem::path(dir).parent_path() / libdir / "gpureap" / kModuleName).string());
    }
  }
  add((std::filesystem::path(GPUREAP_INSTALL_FULL_LIBDIR) / "gpureap" / kModuleName).string());
  return out;
}

}  // namespace gpureap
