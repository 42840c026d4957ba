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
// milliseconds. With Verb or Resource (as CrashAfterWriteStep names a
// write: "update", "podsets/status"), only those writes fail, and the
// others neither fail nor count. A Conflict answers only the writes a
// real API server can answer with one: updates, and patches that state
// the resourceVersion they read or are server-side applies (a plain
// merge patch never conflicts, and a 409 to one with a uid precondition
// would say the object was replaced); the others go through uncounted.
// The errors stop at the heal at the latest.
type APIErrorsStep struct {
	Error    APIError `json:"error"`
	Requests int      `json:"requests,omitempty"`
	ForMs    int      `json:"forMs,omitempty"`
	Verb     string   `json:"verb,omitempty"`
	Resource string   `json:"resource,omitempty"`
}

func (APIErrorsStep) Fault() string { return "APIErrors" }

var _ AimedAtWrite = APIErrorsStep{}

// AimedWrite is the write the step names (none: every write).
func (s APIErrorsStep) AimedWrite() WriteMatch { return WriteMatch{Verb: s.Verb, Resource: s.Resource} }

// Armed: it acts on what the controller does after it.
func (APIErrorsStep) Armed() {}

var _ Refusing = APIErrorsStep{}

// RefusesToTheEnd: a count of requests ends only when the controller has
// made that many writes; a window of time (ForMs) ends by itself.
func (s APIErrorsStep) RefusesToTheEnd() bool { return s.Requests > 0 }

func (s APIErrorsStep) Apply(_ context.Context, t Target) error {
	switch s.Error {
	case Conflict, TooManyRequests, InternalError, Timeout:
	default:
		return fmt.Errorf("APIErrors: unknown error %q; use Conflict, TooManyRequests, InternalError or Timeout", s.Error)
	}
	if s.Requests <= 0 && s.ForMs <= 0 {
		return noOp("neither requests nor forMs is set")
	}
	return t.FailWrites(s.Error, WriteMatch{Verb: s.Verb, Resource: s.Resource}, s.Requests, time.Duration(s.ForMs)*time.Millisecond)
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
			s.ForMs = 500 * amountIn(t, 1, maxHalfSeconds, "halfSeconds")
		} else {
			// Up to six bursts of a retry helper's five tries of a
			// conflict (bounded-backoff counts each burst as one
			// attempt): what a missing back-off between bursts needs to
			// show.
			s.Requests = amountIn(t, 1, maxRequests, "requests")
		}
		return s
	})
}

// The most an APIErrors step draws: a window of 4 s, or 30 requests.
const (
	maxHalfSeconds = 8
	maxRequests    = 30
)

var _ Aimer = apiErrors{}

// Aims: each of the controller's writes refused as hard as the fault
// goes (every one for the longest window, or the most requests), with
// the error an optimistic write meets most (a conflict) for its updates
// and patches (the probe does not see whether a patch states its
// resourceVersion; for one that does not, that aim refuses nothing), and
// a drawn one of the others for every write. Not known, every write
// refused: a conflict (answering only the optimistic ones), and one of
// the others.
func (apiErrors) Aims(c Config) []*rapid.Generator[Step] {
	var out []*rapid.Generator[Step]
	for _, w := range c.aimedWrites() {
		errs := []APIError{TooManyRequests, InternalError, Timeout}
		if w.Verb == "update" || w.Verb == "patch" || w.Verb == "" {
			out = append(out, hardest(w, []APIError{Conflict}))
		}
		out = append(out, hardest(w, errs))
	}
	return out
}

// hardest draws an APIErrors step over write w with one of errs, for
// the longest window or the most requests.
func hardest(w WriteMatch, errs []APIError) *rapid.Generator[Step] {
	return rapid.Custom(func(t *rapid.T) Step {
		s := APIErrorsStep{Error: rapid.SampledFrom(errs).Draw(t, "error"), Verb: w.Verb, Resource: w.Resource}
		if rapid.Bool().Draw(t, "window") {
			s.ForMs = 500 * maxHalfSeconds
		} else {
			s.Requests = maxRequests
		}
		return s
	})
}

func (apiErrors) Decode(b []byte) (Step, error) { return decodeStep[APIErrorsStep](b) }
