#include "tools/process_group.h"

#include <cstdlib>
#include <string>

#ifdef HCCLSIM_HAVE_MPI
#include <mpi.h>
#endif

namespace hcclsim {

#ifdef HCCLSIM_HAVE_MPI
namespace {

// Started by a launcher (Open MPI, MPICH/Hydra, PMIx): only then is MPI
// initialised, so a plain `hcclsim` run never pays for it.
bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

class MpiGroup : public ProcessGroup {
 public:
  MpiGroup() {
    MPI_Init(nullptr, nullptr);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiGroup() override { MPI_Finalize(); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void send_to_root(const std::string& message) override {
    MPI_Send(message.data(), static_cast<int>(message.size()), MPI_CHAR, 0, kTag, MPI_COMM_WORLD);
  }
  std::string receive_from(int rank) override {
    MPI_Status status;
    MPI_Probe(rank, kTag, MPI_COMM_WORLD, &status);
    int count = 0;
    MPI_Get_count(&status, MPI_CHAR, &count);
    std::string message(static_cast<std::size_t>(count), '\0');
    MPI_Recv(message.data(), count, MPI_CHAR, rank, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return message;
  }

 private:
  static constexpr int kTag = 7;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace
#endif

std::unique_ptr<ProcessGroup> make_process_group() {
#ifdef HCCLSIM_HAVE_MPI
  if (launched_by_mpirun()) return std::make_unique<MpiGroup>();
#endif
  return std::make_unique<SingleProcess>();
}

}  // namespace hcclsim
