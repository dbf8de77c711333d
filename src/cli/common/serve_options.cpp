#include "cli/common/serve_options.hpp"

#include <fmt/format.h>

#include "cli/common/option_limits.hpp"
#include "text/duration.hpp"
#include "text/sanitize.hpp"

namespace gpureap {

std::string check_serve_options(const ServeOptionsText& typed, ServeOptions& out) {
  std::string error;
  const auto listen = parse_listen_address(typed.listen.value_or(std::string(kDefaultListenAddress)), error);
  if (!listen) return error;
  out.listen = *listen;
  double max_scrapes = 0;
  if (error = check_number_option("--max-scrapes", typed.max_scrapes, option_limits::kMaxScrapes, "scrapes", max_scrapes);
      !error.empty()) {
    return error;
  }
  if (max_scrapes < 1 || max_scrapes != static_cast<unsigned>(max_scrapes)) {
    return fmt::format("--max-scrapes {}: give a whole number from 1 to {}", sanitize_for_terminal(typed.max_scrapes),
                       option_limits::kMaxScrapes);
  }
  out.max_scrapes = static_cast<unsigned>(max_scrapes);
  if (typed.web_config) {
    const auto web = load_web_config(*typed.web_config, error);
    if (!web) return "--web-config: " + error;
    out.web = *web;
  }
  return {};
}

void warn_about_exposure(const ServeOptions& serve, bool per_process, const std::function<void(const std::string&)>& say) {
  if (serve.listen.loopback) return;
  if (!serve.web.basic_auth()) {
    say(fmt::format("listening on {}, beyond this host, without authentication{}: consider --web-config with "
                    "basic_auth_users and TLS",
                    serve.listen.text(), per_process ? " (--per-process shows users and command lines)" : ""));
  } else if (!serve.web.tls()) {
    say("basic auth without TLS: passwords cross the network in clear text (add tls_server_config)");
  }
}

}  // namespace gpureap
