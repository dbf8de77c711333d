// Test helper: creates IPC objects the way a crashing GPU job leaves them, prints their ids,
// and exits, so that their creator is gone. Usage: ipc-leaver SHM_BYTES POSIX_NAME POSIX_BYTES
// Prints: shmid=<id> semid=<id> posix=/dev/shm/<name>
#include <fcntl.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: ipc-leaver SHM_BYTES POSIX_NAME POSIX_BYTES\n");
    return 2;
  }
  const std::size_t shm_bytes = std::strtoull(argv[1], nullptr, 10);
  const std::string posix_name = std::string("/") + argv[2];
  const std::size_t posix_bytes = std::strtoull(argv[3], nullptr, 10);

  const int shmid = shmget(IPC_PRIVATE, shm_bytes, IPC_CREAT | 0600);
  if (shmid < 0) return std::perror("shmget"), 1;
  void* at = shmat(shmid, nullptr, 0);
  if (at == reinterpret_cast<void*>(-1)) return std::perror("shmat"), 1;
  std::memset(at, 0x5a, shm_bytes);  // touched: it holds RAM
  shmdt(at);

  const int semid = semget(IPC_PRIVATE, 2, IPC_CREAT | 0600);
  if (semid < 0) return std::perror("semget"), 1;
  for (unsigned short i = 0; i < 2; ++i) {
    sembuf op{i, 1, 0};
    if (semop(semid, &op, 1) != 0) return std::perror("semop"), 1;
  }

  const int fd = shm_open(posix_name.c_str(), O_CREAT | O_RDWR | O_EXCL, 0600);
  if (fd < 0) return std::perror("shm_open"), 1;
  if (ftruncate(fd, static_cast<off_t>(posix_bytes)) != 0) return std::perror("ftruncate"), 1;
  void* map = mmap(nullptr, posix_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return std::perror("mmap"), 1;
  std::memset(map, 0x5a, posix_bytes);
  munmap(map, posix_bytes);
  close(fd);
  std::printf("shmid=%d semid=%d posix=/dev/shm%s\n", shmid, semid, posix_name.c_str());
  return 0;
}
