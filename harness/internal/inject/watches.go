package inject

import (
	"bytes"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"
)

// DelayWatches delays the controller's watch events of resource (all
// when "") by delay for window.
func (f *Faults) DelayWatches(resource string, delay, window time.Duration) {
	f.mu.Lock()
	f.watchDelay, f.watchUntil, f.watchOf = delay, time.Now().Add(window), resource
	f.mu.Unlock()
}

// DropWatches cuts every open watch of the controller of resource (all
// when ""); it reports whether there was one.
func (f *Faults) DropWatches(resource string) bool {
	f.mu.Lock()
	open := make([]*delayedBody, 0, len(f.watches))
	for b := range f.watches {
		if resource == "" || b.resource == resource {
			open = append(open, b)
		}
	}
	f.mu.Unlock()
	for _, b := range open {
		b.cut()
	}
	return len(open) > 0
}

// Undelivered counts the watch chunks held back now: the controller has
// events coming, so it is not idle.
func (f *Faults) Undelivered() int64 { return f.undelivered.Load() }

// SinceHeldDelivery is the time since a watch chunk held back was last
// delivered; long ago when none was.
func (f *Faults) SinceHeldDelivery() time.Duration {
	at := f.heldDelivered.Load()
	if at == 0 {
		return time.Duration(math.MaxInt64)
	}
	return time.Since(time.Unix(0, at))
}

// watchDelayNow is the delay in force for the watches of resource.
func (f *Faults) watchDelayNow(resource string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Now().Before(f.watchUntil) && (f.watchOf == "" || f.watchOf == resource) {
		return f.watchDelay
	}
	return 0
}

// Watched are the resources the controller has watched, sorted.
func (f *Faults) Watched() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.watched))
}

// watchedResource is the resource a watch is of ("pods"), read as the
// API server reads its path.
func watchedResource(req *http.Request) string {
	if info, err := requestInfos.NewRequestInfo(req); err == nil && info.IsResourceRequest {
		return info.Resource
	}
	return ""
}

// delayedBody passes a watch stream on, each chunk no sooner than the
// watch delay in force after it arrived, nor before its instance's stale
// view ends: order is kept, events are late.
// Two goroutines per stream, receive and deliver, both end when the
// stream ends, is cut or is closed.
type delayedBody struct {
	f        *Faults
	inst     *Instance
	resource string // what it watches: "pods"
	src      io.ReadCloser
	out      *io.PipeReader
	in       *io.PipeWriter
	cutOnce  sync.Once
	cutCh    chan struct{}

	mu        sync.Mutex
	pending   []watchChunk  // received, not delivered yet
	arrived   chan struct{} // signalled (capacity 1) when pending grows
	delivered bool          // deliver has ended: nothing more is queued
}

type watchChunk struct {
	at   time.Time
	data []byte
	err  error // the stream's end
}

func (f *Faults) delayed(src io.ReadCloser, inst *Instance, resource string) *delayedBody {
	out, in := io.Pipe()
	b := &delayedBody{f: f, inst: inst, resource: resource, src: src, out: out, in: in, cutCh: make(chan struct{}), arrived: make(chan struct{}, 1)}
	f.mu.Lock()
	f.watches[b] = true
	if resource != "" {
		f.watched[resource] = true
	}
	f.mu.Unlock()
	go b.receive()
	go b.deliver()
	return b
}

// receive queues what the stream brings, each chunk in a slice of its own
// size (a watch event is often a few hundred bytes of a 32 KiB read).
func (b *delayedBody) receive() {
	buf := make([]byte, 32<<10)
	for {
		n, err := b.src.Read(buf)
		if n > 0 {
			b.push(watchChunk{at: time.Now(), data: bytes.Clone(buf[:n])})
		}
		if err != nil {
			b.push(watchChunk{at: time.Now(), err: err})
			return
		}
	}
}

// push queues a chunk for deliver, unless deliver has ended.
func (b *delayedBody) push(c watchChunk) {
	b.mu.Lock()
	if b.delivered {
		b.mu.Unlock()
		return
	}
	if c.err == nil {
		b.f.undelivered.Add(1)
	}
	b.pending = append(b.pending, c)
	b.mu.Unlock()
	select {
	case b.arrived <- struct{}{}:
	default:
	}
}

// next waits for the oldest pending chunk; false once the stream is cut.
func (b *delayedBody) next() (watchChunk, bool) {
	for {
		b.mu.Lock()
		if len(b.pending) > 0 {
			c := b.pending[0]
			b.pending[0] = watchChunk{}
			b.pending = b.pending[1:]
			b.mu.Unlock()
			return c, true
		}
		b.mu.Unlock()
		select {
		case <-b.arrived:
		case <-b.cutCh:
			return watchChunk{}, false
		}
	}
}

func (b *delayedBody) deliver() {
	// Chunks dropped with a cut stream are no longer coming; a stream that
	// ended is no longer open.
	defer func() {
		b.f.mu.Lock()
		delete(b.f.watches, b)
		b.f.mu.Unlock()
		b.mu.Lock()
		b.delivered = true
		for _, c := range b.pending {
			if c.err == nil {
				b.f.undelivered.Add(-1)
			}
		}
		b.pending = nil
		b.mu.Unlock()
	}()
	for {
		c, ok := b.next()
		if !ok {
			return
		}
		held := false
		for time.Since(c.at) < b.f.watchDelayNow(b.resource) || c.at.Before(b.inst.heldUntil()) {
			held = true
			select {
			case <-b.cutCh:
				if c.err == nil {
					b.f.undelivered.Add(-1)
				}
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		if c.err != nil {
			b.in.CloseWithError(c.err)
			return
		}
		_, err := b.in.Write(c.data)
		if held {
			now := time.Now()
			if last := b.f.heldDelivered.Swap(now.UnixNano()); now.Sub(time.Unix(0, last)) >= deliveredEvery {
				b.f.opts.Delivered(now)
			}
		}
		b.f.undelivered.Add(-1)
		if err != nil {
			return
		}
	}
}

// cut ends the stream as a dropped connection does.
func (b *delayedBody) cut() {
	b.cutOnce.Do(func() {
		close(b.cutCh)
		b.in.CloseWithError(io.ErrUnexpectedEOF)
		_ = b.src.Close()
		b.f.mu.Lock()
		delete(b.f.watches, b)
		b.f.mu.Unlock()
	})
}

func (b *delayedBody) Read(p []byte) (int, error) { return b.out.Read(p) }

func (b *delayedBody) Close() error {
	b.cut()
	return b.out.Close()
}
