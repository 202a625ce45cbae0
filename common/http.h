// An HTTP client for the trackers' REST APIs (trackers/mlflow.h): one connection kept open between
// requests, bounded waits, and every failure a std::runtime_error that says which address and why
// — never an abort, never a hang: a tracker that is down must not stop a run (docs/trackers.md).
// libcurl does the work (TLS, proxies from the environment, redirects).
#pragma once

#include <chrono>
#include <string>
#include <vector>

typedef void CURL;  // libcurl's handle, as <curl/curl.h> declares it

namespace trainyard {

struct HttpResponse {
  long status = 0;  // 200, 404, ...
  std::string body;
};

struct HttpOptions {
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds timeout{60000};  // the whole request, the transfer included
  std::vector<std::string> headers{};        // "Authorization: Bearer ...", sent with every request
  std::string basic_auth{};                  // "user:password" for HTTP basic authentication
};

class HttpClient {
 public:
  explicit HttpClient(HttpOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // `method` ("GET", "POST", "PUT") to `url` with `body` of `content_type` (no body: ""). Any
  // status comes back; std::runtime_error when no answer came ("cannot reach <url>: <reason>").
  HttpResponse request(const std::string& method, const std::string& url,
                       const std::string& body = "", const std::string& content_type = "");

 private:
  CURL* curl_;
  HttpOptions options_;
};

// `text` with every character but [A-Za-z0-9-._~] as %XX, for a URL's query or path.
std::string url_escape(const std::string& text);

}  // namespace trainyard
