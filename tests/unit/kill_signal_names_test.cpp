#include <gtest/gtest.h>

#include <csignal>

#include "kill/escalation.hpp"
#include "text/signal_names.hpp"

namespace gpureap {
namespace {

TEST(KillSignalNames, NamesTheLadderSignals) {
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(signal_name(SIGKILL), "SIGKILL");
  EXPECT_EQ(signal_name(SIGCONT), "SIGCONT");
  EXPECT_EQ(signal_name(SIGSTOP), "SIGSTOP");
  EXPECT_EQ(signal_name(SIGINT), "SIGINT");
  EXPECT_EQ(signal_name(SIGHUP), "SIGHUP");
  EXPECT_EQ(signal_name(SIGQUIT), "SIGQUIT");
  EXPECT_EQ(signal_name(SIGUSR1), "SIGUSR1");
  EXPECT_EQ(signal_name(SIGUSR2), "SIGUSR2");
}

TEST(KillSignalNames, ParsesNamesWithOrWithoutPrefixInAnyCaseAndNumbers) {
  EXPECT_EQ(parse_signal("TERM"), SIGTERM);
  EXPECT_EQ(parse_signal("SIGTERM"), SIGTERM);
  EXPECT_EQ(parse_signal("sigterm"), SIGTERM);
  EXPECT_EQ(parse_signal("int"), SIGINT);
  EXPECT_EQ(parse_signal("Hup"), SIGHUP);
  EXPECT_EQ(parse_signal("SIGKILL"), SIGKILL);
  EXPECT_EQ(parse_signal("quit"), SIGQUIT);
  EXPECT_EQ(parse_signal("usr1"), SIGUSR1);
  EXPECT_EQ(parse_signal("SIGUSR2"), SIGUSR2);
  EXPECT_EQ(parse_signal("stop"), SIGSTOP);
  EXPECT_EQ(parse_signal("CONT"), SIGCONT);
  EXPECT_EQ(parse_signal("15"), 15);
  EXPECT_EQ(parse_signal("1"), 1);
  EXPECT_EQ(parse_signal("64"), 64);
  for (const char* bad : {"", "0", "65", "-9", "TERMINATE", "SIG", "9x", "SIGSEGVV", " TERM", "99999999999"}) {
    EXPECT_EQ(parse_signal(bad), std::nullopt) << bad;
  }
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGKILL, SIGQUIT, SIGUSR1, SIGUSR2, SIGSTOP, SIGCONT}) {
    EXPECT_EQ(parse_signal(signal_name(sig)), sig);
  }
}

TEST(KillSignalNames, OutcomeNames) {
  EXPECT_EQ(kill_outcome_name(KillOutcome::ExitedAfterSignal), "exited");
  EXPECT_EQ(kill_outcome_name(KillOutcome::Killed), "killed");
  EXPECT_EQ(kill_outcome_name(KillOutcome::AlreadyGone), "already-gone");
  EXPECT_EQ(kill_outcome_name(KillOutcome::Zombie), "zombie");
  EXPECT_EQ(kill_outcome_name(KillOutcome::StuckInD), "stuck-in-d");
  EXPECT_EQ(kill_outcome_name(KillOutcome::Survived), "survived");
  EXPECT_EQ(kill_outcome_name(KillOutcome::PermissionDenied), "permission-denied");
  EXPECT_EQ(kill_outcome_name(KillOutcome::IdentityChanged), "identity-changed");
  EXPECT_EQ(kill_outcome_name(KillOutcome::Refused), "refused");
}

}  // namespace
}  // namespace gpureap
