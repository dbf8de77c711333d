#include "export_support.hpp"

#include <crypt.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "child_leak_checks.hpp"

namespace gpureap::test {
namespace {

std::string read_whole(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

double sample_number(const std::string& text) {
  if (text == "NaN") return std::nan("");
  if (text == "+Inf") return HUGE_VAL;
  if (text == "-Inf") return -HUGE_VAL;
  return std::stod(text);
}

// One `name{label="value",...} number` line of the text format.
std::optional<ScrapedSample> parse_sample_line(const std::string& line) {
  ScrapedSample sample;
  std::size_t at = line.find_first_of("{ ");
  if (at == std::string::npos) return std::nullopt;
  sample.name = line.substr(0, at);
  if (line[at] == '{') {
    ++at;
    while (at < line.size() && line[at] != '}') {
      const std::size_t eq = line.find("=\"", at);
      if (eq == std::string::npos) return std::nullopt;
      const std::string label = line.substr(at, eq - at);
      std::string value;
      at = eq + 2;
      for (; at < line.size() && line[at] != '"'; ++at) {
        if (line[at] != '\\') {
          value += line[at];
          continue;
        }
        if (++at >= line.size()) return std::nullopt;
        const char escaped = line[at];
        if (escaped == 'n') value += '\n';
        else if (escaped == '\\' || escaped == '"') value += escaped;
        else return std::nullopt;  // the format knows no other escape
      }
      if (at >= line.size()) return std::nullopt;
      sample.labels[label] = value;
      ++at;  // the closing quote
      if (at < line.size() && line[at] == ',') ++at;
    }
    if (at >= line.size()) return std::nullopt;
    ++at;  // '}'
  }
  if (at >= line.size() || line[at] != ' ') return std::nullopt;
  try {
    sample.value = sample_number(line.substr(at + 1));
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return sample;
}

// A string as Go's strconv.Quote writes it (promtool's dump), without its quotes; `at` is
// past the opening quote and ends past the closing one.
std::string go_unquote(const std::string& text, std::size_t& at) {
  std::string out;
  const auto hex = [&](std::size_t digits) {
    const unsigned long code = std::stoul(text.substr(at + 1, digits), nullptr, 16);
    at += digits;
    return code;
  };
  for (; at < text.size() && text[at] != '"'; ++at) {
    if (text[at] != '\\') {
      out += text[at];
      continue;
    }
    const char c = text[++at];
    switch (c) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case 'x': out += static_cast<char>(hex(2)); break;
      case 'u':
      case 'U': {
        const unsigned long code = hex(c == 'u' ? 4 : 8);
        if (code < 0x80) {
          out += static_cast<char>(code);
        } else if (code < 0x800) {
          out += static_cast<char>(0xC0 | (code >> 6));
          out += static_cast<char>(0x80 | (code & 0x3F));
        } else if (code < 0x10000) {
          out += static_cast<char>(0xE0 | (code >> 12));
          out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
          out += static_cast<char>(0x80 | (code & 0x3F));
        } else {
          out += static_cast<char>(0xF0 | (code >> 18));
          out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
          out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
          out += static_cast<char>(0x80 | (code & 0x3F));
        }
        break;
      }
      default: out += c;  // \\ and \"
    }
  }
  ++at;
  return out;
}

std::string trim(std::string s) {
  const auto first = s.find_first_not_of(" \t`");
  const auto last = s.find_last_not_of(" \t`");
  return first == std::string::npos ? std::string() : s.substr(first, last - first + 1);
}

}  // namespace

std::optional<double> Scrape::value(const std::string& name, const std::map<std::string, std::string>& labels) const {
  std::optional<double> found;
  int matches = 0;
  for (const auto* sample : all(name)) {
    bool match = true;
    for (const auto& [k, v] : labels) {
      const auto it = sample->labels.find(k);
      if (it == sample->labels.end() || it->second != v) match = false;
    }
    if (!match) continue;
    ++matches;
    found = sample->value;
  }
  EXPECT_LE(matches, 1) << name << ": several samples match";
  return found;
}

std::vector<const ScrapedSample*> Scrape::all(const std::string& name) const {
  std::vector<const ScrapedSample*> out;
  for (const auto& s : samples) {
    if (s.name == name) out.push_back(&s);
  }
  return out;
}

Scrape parse_exposition(const std::string& text) {
  Scrape scrape;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream words(line.substr(7));
      std::string name, type;
      words >> name >> type;
      EXPECT_EQ(scrape.types.count(name), 0u) << name << " declared twice: families must be grouped";
      scrape.types[name] = type;
      continue;
    }
    if (line[0] == '#') continue;
    const auto sample = parse_sample_line(line);
    if (!sample) {
      ADD_FAILURE() << "not a sample line of the text format: " << line;
      continue;
    }
    scrape.samples.push_back(*sample);
  }
  return scrape;
}

std::string bcrypt_of(const std::string& password, int cost) {
  crypt_data data;
  std::memset(&data, 0, sizeof(data));
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  if (crypt_gensalt_rn("$2y$", cost, nullptr, 0, salt, sizeof(salt)) == nullptr) return {};
  const char* hash = crypt_r(password.c_str(), salt, &data);
  return hash ? hash : "";
}

std::string write_tls_web_config(const std::string& dir, const std::string& user, const std::string& password) {
  const auto cert = run_command({"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                                 "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                                 "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", dir + "/tls.key", "-out",
                                 dir + "/tls.crt"});
  EXPECT_EQ(cert.exit_code, 0) << cert.err;
  if (cert.exit_code != 0) return {};
  std::ofstream(dir + "/web.yml") << "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n"
                                  << "basic_auth_users:\n  " << user << ": " << bcrypt_of(password) << "\n";
  return dir + "/web.yml";
}

std::string promtool_binary() {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = dir + "/promtool";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

std::string promtool_check(const std::string& text, const std::string& work_dir) {
  const std::string promtool = promtool_binary();
  if (promtool.empty()) return "promtool is missing (Debian's prometheus package; .ci/run installs it)";
  const std::string input = work_dir + "/check.prom";
  std::ofstream(input) << text;
  SpawnOptions options;
  options.stdin_path = input;
  const auto result = run_command({promtool, "check", "metrics"}, options);
  return result.exit_code == 0 ? std::string() : "promtool check metrics: " + result.out + result.err;
}

std::vector<ScrapedSample> parsed_by_prometheus(const std::string& text, const std::string& parent_dir) {
  std::vector<ScrapedSample> out;
  std::string pattern = parent_dir + "/promtool-XXXXXX";  // a fresh TSDB each time
  if (mkdtemp(pattern.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp in " << parent_dir;
    return out;
  }
  const std::string work_dir = pattern;
  const std::string promtool = promtool_binary();
  if (promtool.empty()) {
    ADD_FAILURE() << "promtool is missing (Debian's prometheus package; .ci/run installs it)";
    return out;
  }
  // The samples as OpenMetrics (the format promtool builds blocks from): a timestamp each, # EOF.
  const std::string input = work_dir + "/samples.om";
  {
    std::ofstream om(input);
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
      if (!line.empty() && line[0] != '#') om << line << " 1700000000\n";
    }
    om << "# EOF\n";
  }
  const std::string db = work_dir + "/tsdb";
  const auto made = run_command({promtool, "tsdb", "create-blocks-from", "openmetrics", input, db});
  if (made.exit_code != 0) {
    ADD_FAILURE() << "promtool could not read the samples: " << made.out << made.err;
    return out;
  }
  std::filesystem::create_directories(db + "/wal");
  const auto dump = run_command({promtool, "tsdb", "dump", db});
  EXPECT_EQ(dump.exit_code, 0) << dump.err;
  // {__name__="x", label="value", ...} 1.5 1700000000000
  std::istringstream lines(dump.out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] != '{') continue;
    ScrapedSample sample;
    std::size_t at = 1;
    while (at < line.size() && line[at] != '}') {
      while (line[at] == ' ' || line[at] == ',') ++at;
      const std::size_t eq = line.find("=\"", at);
      const std::string name = line.substr(at, eq - at);
      at = eq + 2;
      std::string value = go_unquote(line, at);
      if (name == "__name__") sample.name = value;
      else sample.labels[name] = value;
    }
    std::istringstream rest(line.substr(at + 1));
    std::string number;
    rest >> number;
    sample.value = sample_number(number);
    out.push_back(sample);
  }
  return out;
}

ExportServer::ExportServer(const SimHost& host, std::vector<std::string> args, bool add_listen,
                           std::optional<uid_t> uid) {
  static int counter = 0;
  stderr_path_ = host.state_dir() + "/export-stderr-" + std::to_string(counter++) + ".txt";
  if (add_listen && std::find(args.begin(), args.end(), "--listen") == args.end()) {
    args.push_back("--listen");
    args.push_back("127.0.0.1:0");
  }
  args.insert(args.begin(), {gpureap_binary(), "export"});
  SpawnOptions options;
  options.env = host.env();
  options.env["ASAN_OPTIONS"] = asan_options_with_leak_check();  // a daemon: its leaks grow
  options.new_process_group = false;  // setsid below
  options.uid = uid;
  const PreparedExec exec(args, options);
  const std::string stderr_path = stderr_path_;
  pid_ = fork();
  if (pid_ == 0) {
    setsid();
    const int null = open("/dev/null", O_RDWR);
    dup2(null, STDIN_FILENO);
    dup2(null, STDOUT_FILENO);
    // Not the test's own stderr: an exporter left running by a failed test would keep ctest's pipe open.
    const int err = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (err >= 0) dup2(err, STDERR_FILENO);
    exec.exec_in_child(false);
  }
  // "gpureap export: serving http://127.0.0.1:41234/metrics"
  eventually(
      [&] {
        const std::string text = stderr_text();
        const std::size_t at = text.find("serving http");
        if (at != std::string::npos) {
          const std::size_t start = text.find("://", at) + 3;
          const std::size_t colon = text.rfind(':', text.find("/metrics", start));
          address_ = text.substr(start, colon - start);
          port_ = std::stoi(text.substr(colon + 1));
          return true;
        }
        int status = 0;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
          reaped_ = true;
          return true;
        }
        return false;
      },
      10000);
}

ExportServer::~ExportServer() {
  if (!reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

std::string ExportServer::stderr_text() const { return read_whole(stderr_path_); }

httplib::Client ExportServer::client() const {
  std::string host = address_;
  if (!host.empty() && host.front() == '[') host = host.substr(1, host.size() - 2);
  httplib::Client client(host, port_);
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(20, 0);
  return client;
}

Scrape ExportServer::scrape(const httplib::Headers& headers) const {
  auto c = client();
  const auto response = c.Get("/metrics", headers);
  if (!response) {
    ADD_FAILURE() << "GET /metrics failed: " << httplib::to_string(response.error()) << "\n" << stderr_text();
    return {};
  }
  EXPECT_EQ(response->status, 200) << response->body;
  EXPECT_EQ(response->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  return parse_exposition(response->body);
}

int ExportServer::stop(int timeout_ms) {
  if (reaped_) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  const bool exited = eventually([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, timeout_ms);
  if (!exited) return -1;
  reaped_ = true;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::map<std::string, ContractFamily> metrics_contract() {
  std::map<std::string, ContractFamily> contract;
  std::istringstream lines(read_whole(std::string(GPUREAP_DOCS_DIR) + "/metrics.md"));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("| `gpureap_", 0) != 0) continue;
    std::vector<std::string> cells;
    std::istringstream parts(line);
    std::string cell;
    while (std::getline(parts, cell, '|')) cells.push_back(cell);
    if (cells.size() < 4) continue;
    ContractFamily family;
    family.type = trim(cells[2]);
    std::string labels = cells[3];
    // "reason (`too-many`, `unauthorized`)": the values in parentheses are not label names.
    while (labels.find('(') != std::string::npos) {
      labels.erase(labels.find('('), labels.find(')') - labels.find('(') + 1);
    }
    std::istringstream names(labels);
    std::string name;
    while (std::getline(names, name, ',')) {
      if (!trim(name).empty()) family.labels.push_back(trim(name));
    }
    contract[trim(cells[1])] = family;
  }
  return contract;
}

}  // namespace gpureap::test
