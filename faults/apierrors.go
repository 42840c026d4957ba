package faults

import (
	"context"
	"fmt"
	"time"

	"pgregory.net/rapid"
)

// APIError is an error the API server can answer a write with.
type APIError string

// The API errors APIErrors injects.
const (
	Conflict        APIError = "Conflict"        // 409: the object changed since it was read
	TooManyRequests APIError = "TooManyRequests" // 429: throttled, retry later
	InternalError   APIError = "InternalError"   // 500
	Timeout         APIError = "Timeout"         // 504: the server gave up waiting
)

// APIErrorsStep makes the controller's API writes fail with Error: the
// next Requests of them, or, when Requests is 0, every write for ForMs
// milliseconds. The errors stop at the heal at the latest.
type APIErrorsStep struct {
	Error    APIError `json:"error"`
	Requests int      `json:"requests,omitempty"`
	ForMs    int      `json:"forMs,omitempty"`
}

func (APIErrorsStep) Fault() string { return "APIErrors" }

// Armed: it acts on what the controller does after it.
func (APIErrorsStep) Armed() {}

func (s APIErrorsStep) Apply(_ context.Context, t Target) error {
	switch s.Error {
	case Conflict, TooManyRequests, InternalError, Timeout:
	default:
		return fmt.Errorf("APIErrors: unknown error %q; use Conflict, TooManyRequests, InternalError or Timeout", s.Error)
	}
	if s.Requests <= 0 && s.ForMs <= 0 {
		return noOp("neither requests nor forMs is set")
	}
	return t.FailWrites(s.Error, s.Requests, time.Duration(s.ForMs)*time.Millisecond)
}

// APIErrors is the API-error fault: conflicts, throttling, server errors
// and timeouts answered to the controller's writes.
func APIErrors() Fault { return apiErrors{} }

type apiErrors struct{}

func (apiErrors) Name() string { return APIErrorsStep{}.Fault() }

func (apiErrors) Steps(Config) *rapid.Generator[Step] {
	return rapid.Custom(func(t *rapid.T) Step {
		s := APIErrorsStep{Error: rapid.SampledFrom([]APIError{Conflict, TooManyRequests, InternalError, Timeout}).Draw(t, "error")}
		if rapid.Bool().Draw(t, "window") {
			s.ForMs = 500 * amountIn(t, 1, 8, "halfSeconds")
		} else {
			// Up to six bursts of a retry helper's five tries of a
			// conflict (bounded-backoff counts each burst as one
			// attempt): what a missing back-off between bursts needs to
			// show.
			s.Requests = amountIn(t, 1, 30, "requests")
		}
		return s
	})
}

func (apiErrors) Decode(b []byte) (Step, error) { return decodeStep[APIErrorsStep](b) }
