package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
)

// funcStartGrace is how long a Func controller must keep running for the
// harness to count it as started: one that fails at start-up returns
// within it.
const funcStartGrace = 500 * time.Millisecond

// Func is harness.Func: see its documentation there.
func Func(run func(ctx context.Context, cfg *rest.Config) error) Controller {
	return funcController{run: run}
}

type funcController struct {
	run func(context.Context, *rest.Config) error
}

func (f funcController) start(ctx context.Context, c *caseRun) (func() error, error) {
	c.reachable.Store(true)
	inst := c.newInstance(nil)
	cfg := c.instanceConfig(inst, true)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	c.goLabelled(ctx, func(ctx context.Context) {
		// Its log goes to the case's (klog.FromContext, logr.FromContext).
		err := callRun(logr.NewContext(ctx, c.logger), f.run, cfg)
		// A run that ends before it is stopped is a crash of the
		// controller, unless the instance was killed on purpose.
		if ctx.Err() == nil && !inst.Dead.Load() {
			c.recorder.Panicked(fmt.Sprintf("the controller returned while the case went on: %v", err))
		}
		done <- err
	})
	select {
	case err := <-done:
		cancel()
		if err == nil {
			err = errors.New("it returned nil at once")
		}
		return nil, fmt.Errorf("the controller did not start: %w", err)
	case <-time.After(funcStartGrace):
	}
	return func() error {
		cancel()
		select {
		case err := <-done:
			inst.CloseConnections()
			if err != nil && !errors.Is(err, context.Canceled) && !inst.Dead.Load() {
				return fmt.Errorf("the controller ended with: %w", err)
			}
			return nil
		case <-time.After(controllerStopTimeout):
			return fmt.Errorf("the controller did not return within %v of its context ending: it must return when ctx is done; its goroutines still running: %s",
				controllerStopTimeout, goroutinesOf(c.namespace))
		}
	}, nil
}

// callRun runs a Func controller, turning a panic into an error.
func callRun(ctx context.Context, run func(context.Context, *rest.Config) error, cfg *rest.Config) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("it panicked: %v", r)
		}
	}()
	return run(ctx, cfg)
}
