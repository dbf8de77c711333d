// The options of a command that serves /metrics (`export`, `watch --listen`): --listen,
// --web-config, --max-scrapes and --per-process, checked the same way for both.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "exporter/listen_address.hpp"
#include "exporter/web_config.hpp"

namespace gpureap {

struct ServeOptionsText {  // as typed
  const std::optional<std::string>& listen;
  const std::optional<std::string>& web_config;
  const std::string& max_scrapes;
};

struct ServeOptions {
  ListenAddress listen;
  WebConfig web;
  unsigned max_scrapes = 10;
};

// The first problem, in one line, or "" with `out` filled (the address defaults to
// kDefaultListenAddress; a host-less ":PORT" listens on loopback, as parse_listen_address says).
std::string check_serve_options(const ServeOptionsText& typed, ServeOptions& out);

// What a person should know about where it listens: per-process labels name users and
// command lines, and basic auth without TLS sends passwords in clear text.
void warn_about_exposure(const ServeOptions& serve, bool per_process, const std::function<void(const std::string&)>& say);

}  // namespace gpureap
