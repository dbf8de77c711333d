// export under MPS: each client's memory in the per-process and per-user series under the
// client, the server's own apart, and a gauge of MPS servers and clients per GPU.
#include <gtest/gtest.h>

#include "export_support.hpp"
#include "mps_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

TEST(ExportMps, ClientsInThePerProcessSeriesAndServersAndClientsCountedPerGpu) {
  SimHost host({"--gpus", "2"});
  MpsDaemon daemon(host, "mps");
  ASSERT_TRUE(daemon.running()) << daemon.error();
  host.set_env("CUDA_MPS_PIPE_DIRECTORY", daemon.pipe());
  auto a = host.start({"--alloc", "0:1GiB"});
  auto b = host.start({"--alloc", "0:512MiB"});
  host.set_env("CUDA_MPS_PIPE_DIRECTORY", "");
  const pid_t server = daemon.server();
  const auto result = host.gpureap({"export", "--once", "--per-process", "--no-kernel-log"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const Scrape scrape = parse_exposition(result.out);
  EXPECT_EQ(scrape.value("gpureap_mps_processes", {{"gpu", "0"}, {"role", "client"}}), 2);
  EXPECT_EQ(scrape.value("gpureap_mps_processes", {{"gpu", "0"}, {"role", "server"}}), 1);
  // The server holds its own context on every GPU; no client runs on GPU 1.
  EXPECT_EQ(scrape.value("gpureap_mps_processes", {{"gpu", "1"}, {"role", "client"}}), 0);
  EXPECT_EQ(scrape.value("gpureap_process_gpu_memory_bytes", {{"gpu", "0"}, {"pid", std::to_string(a.pid)}}), 1 * GiB);
  EXPECT_EQ(scrape.value("gpureap_process_gpu_memory_bytes", {{"gpu", "0"}, {"pid", std::to_string(b.pid)}}), 512 * MiB);
  EXPECT_EQ(scrape.value("gpureap_process_gpu_memory_bytes", {{"gpu", "0"}, {"pid", std::to_string(server)}}), 64 * MiB);
  EXPECT_EQ(scrape.value("gpureap_user_gpu_memory_bytes", {{"gpu", "0"}, {"user", "root"}}), 64 * MiB + 1 * GiB + 512 * MiB);
}

}  // namespace
}  // namespace gpureap::test
