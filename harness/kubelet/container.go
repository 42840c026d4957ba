package kubelet

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ExitStatus is how a container ended.
type ExitStatus struct {
	Code   int32
	Reason string // as the runtime reports it: OOMKilled, Error, Completed
}

// Exit statuses a fault commonly draws.
var (
	// OOMKilled is the kernel's OOM killer: SIGKILL, exit code 137.
	OOMKilled = ExitStatus{Code: 137, Reason: "OOMKilled"}
	// Killed is a SIGKILL from outside the container.
	Killed = ExitStatus{Code: 137, Reason: "Error"}
	// Completed is a clean exit.
	Completed = ExitStatus{Code: 0, Reason: "Completed"}
)

// Failed returns the status of a container that exited with code.
func Failed(code int32) ExitStatus { return ExitStatus{Code: code, Reason: "Error"} }

type containerPhase int

const (
	containerCreating containerPhase = iota // waiting: ContainerCreating
	containerRunning
	containerBackOff    // waiting: CrashLoopBackOff
	containerTerminated // exited, not to be restarted
)

// containerState is the simulator's view of one container of a pod.
type containerState struct {
	name, image  string
	phase        containerPhase
	restartCount int32
	startAt      time.Time // creating: when it starts; backoff: when it restarts
	startedAt    time.Time
	readyAt      time.Time
	exit         ExitStatus
	finishedAt   time.Time
	last         *corev1.ContainerStateTerminated
	// probes are the container's probes; startedOK is when its startup
	// probe succeeds, probeKillAt when a failing probe kills it (zero if
	// none does).
	probes      probes
	startedOK   time.Time
	probeKillAt time.Time
	// A crash loop: the next crashStarts starts end with crashExit at
	// crashAt (zero when the running instance is not to crash).
	crashStarts int
	crashExit   ExitStatus
	crashAt     time.Time
	// unready overrides readiness (ReadinessFlap).
	unready bool
}

func (c *containerState) id(podUID string) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%d", podUID, c.name, c.restartCount))
	return "containerd://" + hex.EncodeToString(sum[:])
}

func (c *containerState) ready(now time.Time) bool {
	return c.phase == containerRunning && !c.unready && !failing(c.probes.readiness) && c.started(now) && !now.Before(c.readyAt)
}

// status renders the container's status as the kubelet reports it.
func (c *containerState) status(podUID string, now time.Time, clusterBackOff time.Duration, podKey string) corev1.ContainerStatus {
	s := corev1.ContainerStatus{
		Name:         c.name,
		Image:        c.image,
		ImageID:      imageID(c.image),
		RestartCount: c.restartCount,
		LastTerminationState: corev1.ContainerState{
			Terminated: c.last,
		},
		Started: new(bool),
		Ready:   c.ready(now),
	}
	switch c.phase {
	case containerCreating:
		s.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
		s.ImageID = ""
	case containerRunning:
		s.ContainerID = c.id(podUID)
		*s.Started = c.started(now)
		s.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.startedAt)}
	case containerBackOff:
		s.ContainerID = c.id(podUID)
		s.State.Waiting = &corev1.ContainerStateWaiting{
			Reason: "CrashLoopBackOff",
			// The kubelet's message, from kuberuntime_manager.go doBackOff.
			Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", clusterBackOff, c.name, podKey),
		}
	case containerTerminated:
		s.ContainerID = c.id(podUID)
		s.State.Terminated = c.terminated(podUID)
	}
	return s
}

func (c *containerState) terminated(podUID string) *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{
		ExitCode:    c.exit.Code,
		Reason:      c.exit.Reason,
		StartedAt:   metav1.NewTime(c.startedAt),
		FinishedAt:  metav1.NewTime(c.finishedAt),
		ContainerID: c.id(podUID),
	}
}

func imageID(image string) string {
	sum := sha256.Sum256([]byte(image))
	return image + "@sha256:" + hex.EncodeToString(sum[:])
}
