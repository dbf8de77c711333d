#include "common/alloc_record.hpp"

#include <nlohmann/json.hpp>

namespace gpusim {

using nlohmann::json;

const char* proc_type_letter(ProcType t) {
  switch (t) {
    case ProcType::Compute: return "C";
    case ProcType::Graphics: return "G";
    case ProcType::Mps: return "M";
  }
  return "?";
}

std::optional<ProcType> proc_type_from_letter(const std::string& s) {
  if (s == "C" || s == "c") return ProcType::Compute;
  if (s == "G" || s == "g") return ProcType::Graphics;
  if (s == "M" || s == "m") return ProcType::Mps;
  return std::nullopt;
}

Result<AllocRecord> parse_alloc_record(const std::string& json_text) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Error{"allocation record is not a JSON object"};
  try {
    AllocRecord r;
    r.id = j.at("id").get<std::string>();
    r.gpu = j.at("gpu").get<unsigned>();
    if (auto it = j.find("gi"); it != j.end() && !it->is_null()) r.gi = it->get<unsigned>();
    r.ci = j.value("ci", 0u);
    auto type = proc_type_from_letter(j.at("type").get<std::string>());
    if (!type) return Error{"allocation record: bad type"};
    r.type = *type;
    r.bytes = j.at("bytes").get<std::uint64_t>();
    r.owner_pid = j.at("owner_pid").get<unsigned>();
    r.owner_nspid = j.value("owner_nspid", 0u);
    r.owner_name = j.value("owner_name", std::string());
    if (auto it = j.find("release_delay_ms"); it != j.end() && !it->is_null()) {
      r.release_delay_ms = it->get<std::uint64_t>();
    }
    r.leak = j.value("leak", false);
    r.created_ns = j.value("created_ns", std::int64_t{0});
    r.sm_util = j.value("sm_util", 0u);
    r.mem_util = j.value("mem_util", 0u);
    r.mps_server_pid = j.value("mps_server_pid", 0u);
    return r;
  } catch (const std::exception& e) {
    return Error{std::string("allocation record: ") + e.what()};
  }
}

std::string serialize_alloc_record(const AllocRecord& r) {
  json j{{"id", r.id},
         {"gpu", r.gpu},
         {"gi", r.gi ? json(*r.gi) : json(nullptr)},
         {"ci", r.ci},
         {"type", proc_type_letter(r.type)},
         {"bytes", r.bytes},
         {"owner_pid", r.owner_pid},
         {"owner_nspid", r.owner_nspid},
         {"owner_name", r.owner_name},
         {"release_delay_ms", r.release_delay_ms ? json(*r.release_delay_ms) : json(nullptr)},
         {"leak", r.leak},
         {"created_ns", r.created_ns},
         {"sm_util", r.sm_util},
         {"mem_util", r.mem_util},
         {"mps_server_pid", r.mps_server_pid}};
  return j.dump(2) + "\n";
}

}  // namespace gpusim
