package storage

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubeprop/kubeprop/harness/internal/workers"
	"k8s.io/utils/ptr"
)

const (
	// ClassName is the default StorageClass's name.
	ClassName = "standard"
	// Driver is the simulated CSI driver: the class's provisioner and the
	// driver of every volume it provisions.
	Driver = "hollow.kubeprop.dev"
	// UserAgent is the Provisioner's user agent, and so its field manager.
	UserAgent = "kubeprop-provisioner"
)

// Options configures a Provisioner. The zero value is ready to use.
type Options struct {
	// Workers is how many claims and volumes are handled at once. Zero
	// means 2.
	Workers int
}

// Provisioner provisions, resizes and deletes the volumes of the default
// StorageClass.
type Provisioner struct {
	client  kubernetes.Interface
	claims  corelisters.PersistentVolumeClaimLister
	volumes corelisters.PersistentVolumeLister
	queue   workqueue.TypedRateLimitingInterface[key]
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// key is a queued claim (namespace and name) or volume (name only).
type key struct {
	namespace, name string
	volume          bool
}

// Start creates the default StorageClass and the driver's CSIDriver on the
// cluster that cfg connects to (as an administrator), and starts the
// Provisioner. It returns once its caches are filled; Stop ends it.
func Start(ctx context.Context, cfg *rest.Config, opts Options) (*Provisioner, error) {
	if cfg == nil {
		return nil, errors.New("storage provisioner: the rest.Config is nil; pass an administrator's connection")
	}
	if opts.Workers == 0 {
		opts.Workers = 2
	}
	if opts.Workers < 0 {
		return nil, fmt.Errorf("storage provisioner: Workers %d is negative", opts.Workers)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = UserAgent
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("storage provisioner: creating its client: %w", err)
	}
	if err := createClass(ctx, client); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &Provisioner{
		client: client,
		cancel: cancel,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[key](),
			workqueue.TypedRateLimitingQueueConfig[key]{Name: "kubeprop-provisioner"}),
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	claims := factory.Core().V1().PersistentVolumeClaims()
	volumes := factory.Core().V1().PersistentVolumes()
	p.claims, p.volumes = claims.Lister(), volumes.Lister()
	for _, h := range []struct {
		informer cache.SharedIndexInformer
		volume   bool
	}{{claims.Informer(), false}, {volumes.Informer(), true}} {
		enqueue := func(obj any) { p.enqueue(obj, h.volume) }
		if _, err := h.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) },
		}); err != nil {
			cancel()
			return nil, fmt.Errorf("storage provisioner: watching claims and volumes: %w", err)
		}
	}
	if err := workers.Start(ctx, "storage provisioner", factory, p.queue, opts.Workers, p.processNext, &p.wg); err != nil {
		cancel()
		return nil, err
	}
	return p, nil
}

// createClass creates the default StorageClass and the CSIDriver, unless
// they exist (a cluster started again on the same etcd keeps them).
func createClass(ctx context.Context, client kubernetes.Interface) error {
	class := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: ClassName,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:          Driver,
		ReclaimPolicy:        ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode:    ptr.To(storagev1.VolumeBindingImmediate),
		AllowVolumeExpansion: ptr.To(true),
	}
	if _, err := client.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("storage provisioner: creating StorageClass %s: %w", ClassName, err)
	}
	// No attach step: the attach-detach controller leaves the volumes to
	// the (simulated) kubelet.
	driver := &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: Driver},
		Spec:       storagev1.CSIDriverSpec{AttachRequired: ptr.To(false), PodInfoOnMount: ptr.To(false)},
	}
	if _, err := client.StorageV1().CSIDrivers().Create(ctx, driver, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("storage provisioner: creating CSIDriver %s: %w", Driver, err)
	}
	return nil
}

// Stop ends the Provisioner. The volumes stay.
func (p *Provisioner) Stop() {
	if p == nil {
		return
	}
	p.cancel()
	p.wg.Wait()
}

func (p *Provisioner) enqueue(obj any, volume bool) {
	m, err := metaOf(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	p.queue.Add(key{namespace: m.GetNamespace(), name: m.GetName(), volume: volume})
}

func metaOf(obj any) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("storage provisioner: an event of a %T", obj)
	}
	return m, nil
}

func (p *Provisioner) processNext(ctx context.Context) bool {
	k, shutdown := p.queue.Get()
	if shutdown {
		return false
	}
	defer p.queue.Done(k)
	var err error
	if k.volume {
		err = p.syncVolume(ctx, k.name)
	} else {
		err = p.syncClaim(ctx, k.namespace, k.name)
	}
	switch {
	case err == nil:
		p.queue.Forget(k)
	case ctx.Err() != nil:
	default:
		// Try again, backing off. A conflict (the binder wrote the object
		// meanwhile) is routine and not worth a log line.
		if !apierrors.IsConflict(err) {
			utilruntime.HandleError(err)
		}
		p.queue.AddRateLimited(k)
	}
	return true
}
