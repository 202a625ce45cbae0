#include "common/http.h"

#include <curl/curl.h>
#include <dlfcn.h>

#include <cctype>
#include <stdexcept>

#include <fmt/format.h>

namespace trainyard {

namespace {

// libcurl, loaded when the first client starts rather than linked: only the trackers need it, the
// wheel then carries none of its dependencies, and a machine without it runs everything else.
// libcurl.so.4 has kept its ABI since 2006.
struct Curl {
  CURLcode (*global_init)(long flags);
  CURL* (*easy_init)();
  CURLcode (*easy_setopt)(CURL* curl, CURLoption option, ...);
  CURLcode (*easy_perform)(CURL* curl);
  CURLcode (*easy_getinfo)(CURL* curl, CURLINFO info, ...);
  void (*easy_reset)(CURL* curl);
  void (*easy_cleanup)(CURL* curl);
  const char* (*easy_strerror)(CURLcode code);
  curl_slist* (*slist_append)(curl_slist* list, const char* text);
  void (*slist_free_all)(curl_slist* list);
};

template <typename Function>
void resolve(void* library, const char* name, Function*& function) {
  function = reinterpret_cast<Function*>(dlsym(library, name));
  if (!function)
    throw std::runtime_error(fmt::format("libcurl.so.4 has no {}: it is too old", name));
}

// The library, loaded and initialised once (curl_global_init must come before any handle, and is
// not thread-safe before libcurl 7.84).
const Curl& curl() {
  static const Curl loaded = [] {
    void* library = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!library)
      throw std::runtime_error(fmt::format(
          "the trackers need libcurl, which this machine lacks ({}): install it (Debian and "
          "Ubuntu: apt install libcurl4; Fedora: dnf install libcurl)",
          dlerror()));
    Curl curl{};
    resolve(library, "curl_global_init", curl.global_init);
    resolve(library, "curl_easy_init", curl.easy_init);
    resolve(library, "curl_easy_setopt", curl.easy_setopt);
    resolve(library, "curl_easy_perform", curl.easy_perform);
    resolve(library, "curl_easy_getinfo", curl.easy_getinfo);
    resolve(library, "curl_easy_reset", curl.easy_reset);
    resolve(library, "curl_easy_cleanup", curl.easy_cleanup);
    resolve(library, "curl_easy_strerror", curl.easy_strerror);
    resolve(library, "curl_slist_append", curl.slist_append);
    resolve(library, "curl_slist_free_all", curl.slist_free_all);
    if (curl.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
      throw std::runtime_error("cannot start libcurl (curl_global_init failed)");
    return curl;
  }();
  return loaded;
}

size_t append_to_string(char* data, size_t size, size_t count, void* body) {
  static_cast<std::string*>(body)->append(data, size * count);
  return size * count;
}

}  // namespace

HttpClient::HttpClient(HttpOptions options) : options_(std::move(options)) {
  curl_ = curl().easy_init();
  if (!curl_) throw std::runtime_error("cannot start an HTTP client (curl_easy_init failed)");
}

HttpClient::~HttpClient() { curl().easy_cleanup(curl_); }

HttpResponse HttpClient::request(const std::string& method, const std::string& url,
                                 const std::string& body, const std::string& content_type) {
  const Curl& lib = curl();
  HttpResponse response;
  lib.easy_reset(curl_);  // the connection stays open; the last request's settings go
  lib.easy_setopt(curl_, CURLOPT_URL, url.c_str());
  lib.easy_setopt(curl_, CURLOPT_CUSTOMREQUEST, method.c_str());
  lib.easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for DNS timeouts
  lib.easy_setopt(curl_, CURLOPT_CONNECTTIMEOUT_MS,
                  static_cast<long>(options_.connect_timeout.count()));
  lib.easy_setopt(curl_, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.timeout.count()));
  lib.easy_setopt(curl_, CURLOPT_FOLLOWLOCATION, 1L);  // http:// to https://, say: the body again
  lib.easy_setopt(curl_, CURLOPT_POSTREDIR, static_cast<long>(CURL_REDIR_POST_ALL));
  lib.easy_setopt(curl_, CURLOPT_MAXREDIRS, 5L);
  lib.easy_setopt(curl_, CURLOPT_WRITEFUNCTION, append_to_string);
  lib.easy_setopt(curl_, CURLOPT_WRITEDATA, &response.body);
  if (!options_.basic_auth.empty()) {
    lib.easy_setopt(curl_, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    lib.easy_setopt(curl_, CURLOPT_USERPWD, options_.basic_auth.c_str());
  }
  if (method == "GET") {
    lib.easy_setopt(curl_, CURLOPT_HTTPGET, 1L);
  } else {
    lib.easy_setopt(curl_, CURLOPT_POSTFIELDS, body.data());
    lib.easy_setopt(curl_, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  }
  curl_slist* headers = nullptr;
  for (const std::string& header : options_.headers)
    headers = lib.slist_append(headers, header.c_str());
  if (!content_type.empty())
    headers = lib.slist_append(headers, ("Content-Type: " + content_type).c_str());
  headers = lib.slist_append(headers, "Expect:");  // no 100-continue round trip for large bodies
  lib.easy_setopt(curl_, CURLOPT_HTTPHEADER, headers);
  const CURLcode code = lib.easy_perform(curl_);
  lib.slist_free_all(headers);
  if (code != CURLE_OK)
    throw std::runtime_error(fmt::format("cannot reach {}: {}", url, lib.easy_strerror(code)));
  lib.easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

std::string url_escape(const std::string& text) {
  std::string escaped;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~')
      escaped += static_cast<char>(c);
    else
      escaped += fmt::format("%{:02X}", c);
  }
  return escaped;
}

}  // namespace trainyard
