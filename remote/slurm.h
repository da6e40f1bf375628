// Jobs on a Slurm cluster, reached by SSH on its login node (a Host with `slurm`
// set). The bundle goes into the job's folder under the work directory, which must
// be on the filesystem the compute nodes share, with a generated batch script;
// `sbatch --parsable` queues it and its id is recorded with NetLoom's own. The
// script runs the ranks as one `srun` step (so `scancel --signal=TERM` reaches
// them: stop), one rank per GPU or `tasks_per_node` per node on CPUs, which meet
// through a rendezvous folder in the job's folder. Requeued (preempted, or
// `scontrol requeue`), it runs again and resumes from the last checkpoint, and the
// stream goes on where it was. Every #SBATCH line is built from validated values
// and every command from quoted arguments: no user text reaches a shell as code.
#pragma once

#include <string>
#include <vector>

#include "remote/jobs.h"

namespace netloom::remote {

// Each field checked; the error names the field ("slurm.partition: ...").
Status validateSlurm(const remotepb::SlurmSettings& s);

// The job name Slurm shows: "netloom-" and the project's name with anything but
// letters, digits, '-', '_' and '.' dropped, at most 48 characters in all.
std::string slurmJobName(const std::string& projectName);

// The batch script for these settings (validated first). It takes netloom-train
// and that program's further arguments as its own arguments.
Result<std::string> slurmScript(const remotepb::SlurmSettings& s, const std::string& jobName);

// Sends the bundle and the script, and queues the job. sbatch's own message is the
// error when the cluster refuses it (an unknown partition, a time limit above the
// partition's).
Result<remotepb::JobRecord> submitSlurm(SshSession& s, const remotepb::Host& host,
                                        const proto::Project& project, const SubmitOptions& o);

// NetLoom's reading of a Slurm state (scontrol's or sacct's JobState), its reason,
// its exit code ("0:15") and whether the run's summary says it stopped on request.
// states: pending (with the reason), running, finished, stopped, cancelled, failed
// (with "time limit", "node failure", "out of memory" as the reason), requeued.
JobStatus slurmJobStatus(const std::string& state, const std::string& reason,
                         const std::string& exitCode, bool stoppedOnRequest);

// Asks the cluster (scontrol, then sacct once the job has left the controller).
Result<JobStatus> slurmStatus(SshSession& s, const remotepb::JobRecord& job);
// The same in two halves, for a caller that must not wait on the answer: the
// command that asks, and the reading of what it wrote.
Result<std::vector<std::string>> slurmStatusCommand(const remotepb::JobRecord& job);
Result<JobStatus> parseSlurmStatus(const std::string& hostLabel, const remotepb::JobRecord& job,
                                   const std::string& out);

// The command that signals a Slurm job: TERM stops it (scancel --signal=TERM to
// its ranks, which stop after the step with a checkpoint), KILL cancels it
// (scancel). Pause is not offered: STOP and CONT are refused.
Result<std::string> slurmSignalCommand(const remotepb::JobRecord& job, const std::string& signal);

// Why a Slurm job ended with no final event of its own (cancelled, out of time, a
// node lost, a rank that crashed): Slurm's state and reason, and the last lines of
// rank 0's log and of the batch script's output.
std::string slurmEnd(SshSession& s, const remotepb::JobRecord& job, const JobStatus& status);

// Follows the stream of a Slurm job: $1 events.pb, $2 first byte, $3 the Slurm job
// id. While the job is pending, running or requeued, `tail -F`; once it has left
// those states, what is left of the file, then the end. tail starts once the file is
// there, so that it watches it with inotify where it can (GNU tail polls a missing
// file once a second for good); on a shared file system it polls, every 50 ms.
extern const char* const kSlurmFollow;

}  // namespace netloom::remote
