package properties_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/kubeprop/kubeprop/properties"
)

// TestRound: milliseconds below a second, tenths of a second above.
func TestRound(t *testing.T) {
	for d, want := range map[time.Duration]string{
		2711663 * time.Microsecond:  "2.7s",
		143665605 * time.Nanosecond: "144ms",
		999600 * time.Microsecond:   "1s",
		61234 * time.Millisecond:    "1m1.2s",
		0:                           "0s",
	} {
		assert.Equal(t, want, properties.Round(d).String(), "%v", d)
	}
}
