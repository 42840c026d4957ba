package kubelet

import (
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"
)

// The kubelet's defaults, in cluster time.
const (
	// pkg/kubelet/apis/config/v1beta1/defaults.go
	nodeStatusUpdateFrequency = 10 * time.Second
	nodeStatusReportFrequency = 5 * time.Minute
	nodeLeaseDuration         = 40 * time.Second
	// The lease is renewed at a quarter of its duration
	// (pkg/kubelet/nodelease: renewIntervalFraction 0.25).
	nodeLeaseRenewInterval = nodeLeaseDuration / 4

	// pkg/kubelet/kubelet.go: backOffPeriod, MaxContainerBackOff, and the
	// HasExpiredFunc that resets the back-off after 600 s.
	crashLoopBackOffInitial = 10 * time.Second
	crashLoopBackOffMax     = 300 * time.Second
	crashLoopBackOffReset   = 600 * time.Second
)

// kubeletVersion is what the simulated nodes report in nodeInfo.
const kubeletVersion = "v1.37.2"

// Options configures a Simulator. The zero value runs on real time with
// nodes of 32 CPUs, 128 GiB and 110 pods.
type Options struct {
	// Clock is the wall clock. Nil means the real one.
	Clock clock.WithTicker

	// TimeScale is cluster seconds per wall second, as for the cluster.
	// Zero means 1.
	TimeScale float64

	// Capacity of each node. Nil means cpu 32, memory 128Gi, pods 110,
	// ephemeral-storage 100Gi. Allocatable equals capacity.
	Capacity corev1.ResourceList

	// ContainerStartDelay is the cluster time from a pod's arrival on the
	// node to its containers running: sandbox and container creation with
	// the image already present. Zero means 1 s.
	ContainerStartDelay time.Duration

	// Workers is how many pods are synced at once; a real kubelet has a
	// worker per pod. Zero means 16.
	Workers int

	// OnEvent, if set, is called for every state change the simulator
	// makes, with the wall time it happened. It must not block.
	OnEvent func(Event)

	// Exec answers the commands run in running containers through
	// pods/exec, and their exec preStop hooks. Nil means every command
	// exits 0 with no output.
	Exec Exec

	// MaxGracePeriod caps, in cluster time, how long a deleted pod's
	// containers take to stop: its grace period, at most this. Zero means
	// 60 s, twice the default grace period, so that a pod with a grace
	// period of hours does not stall a case (PodTerminating events say
	// when the cap cut one).
	MaxGracePeriod time.Duration
}

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.TimeScale == 0 {
		o.TimeScale = 1
	}
	if o.Exec == nil {
		o.Exec = execSucceeds
	}
	if o.Capacity == nil {
		o.Capacity = corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse("32"),
			corev1.ResourceMemory:           resource.MustParse("128Gi"),
			corev1.ResourcePods:             resource.MustParse("110"),
			corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		}
	}
	if o.ContainerStartDelay == 0 {
		o.ContainerStartDelay = time.Second
	}
	if o.Workers == 0 {
		o.Workers = 16
	}
	if o.MaxGracePeriod == 0 {
		o.MaxGracePeriod = 2 * defaultGracePeriod
	}
	return o
}

func (o Options) validate() error {
	if o.TimeScale < 1 || math.IsNaN(o.TimeScale) || math.IsInf(o.TimeScale, 0) {
		return fmt.Errorf("kubelet TimeScale %v is invalid: it is cluster seconds per wall second, at least 1", o.TimeScale)
	}
	if o.ContainerStartDelay < 0 {
		return fmt.Errorf("kubelet ContainerStartDelay %v is negative", o.ContainerStartDelay)
	}
	if o.Workers < 0 {
		return fmt.Errorf("kubelet Workers %d is negative", o.Workers)
	}
	if o.MaxGracePeriod < 0 {
		return fmt.Errorf("kubelet MaxGracePeriod %v is negative", o.MaxGracePeriod)
	}
	return nil
}

// wall converts a cluster duration to wall time.
func (o Options) wall(d time.Duration) time.Duration {
	return time.Duration(float64(d) / o.TimeScale)
}

// EventKind names a state change of the simulator.
type EventKind string

// The state changes a Simulator reports through Options.OnEvent.
const (
	NodeRegistered   EventKind = "NodeRegistered"
	NodeLost         EventKind = "NodeLost"
	NodeRecovered    EventKind = "NodeRecovered"
	NodeRemoved      EventKind = "NodeRemoved"
	ContainerStarted EventKind = "ContainerStarted"
	ContainerExited  EventKind = "ContainerExited"
	ContainerBackOff EventKind = "ContainerBackOff"
	PodDeleted       EventKind = "PodDeleted"
	// ContainerExec is a command run through pods/exec; Exit holds its
	// exit code.
	ContainerExec EventKind = "ContainerExec"
	// PodTerminating is the start of a deleted pod's termination; Grace
	// holds its grace period and GraceUsed what the simulator takes
	// (capped by MaxGracePeriod, at least the kubelet's 2 s).
	PodTerminating EventKind = "PodTerminating"
	// ContainerPreStop is an exec preStop hook run; Exit holds its exit
	// code.
	ContainerPreStop EventKind = "ContainerPreStop"
)

// Event is one state change made by the simulator.
type Event struct {
	Kind EventKind
	// Time is the wall time of the change, from the simulator's clock.
	Time      time.Time
	Node      string
	Namespace string
	Pod       string
	Container string
	// RestartCount of the container after a start.
	RestartCount int32
	// Exit is set for ContainerExited, ContainerExec and ContainerPreStop.
	Exit ExitStatus
	// Command is ContainerExec's and ContainerPreStop's command.
	Command []string
	// Grace and GraceUsed are PodTerminating's grace period and the part
	// of it the simulator takes, in cluster time.
	Grace, GraceUsed time.Duration
	// BackOff is the cluster-time delay before the next start, for
	// ContainerBackOff.
	BackOff time.Duration
}
