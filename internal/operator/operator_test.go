package operator

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStopNoise: the lease released at a deliberate stop, which controller-runtime
// reports as "leader election lost" after the stop sequence was engaged, is logged at
// info while the operator stops; the same while running, and any other error while
// stopping, stay errors.
func TestStopNoise(t *testing.T) {
	lost := errors.New("leader election lost")
	for _, c := range []struct {
		name     string
		stopping bool
		level    slog.Level
		err      error
		want     []string
		wantNot  []string
	}{
		{"stopping", true, slog.LevelInfo, lost, []string{`level=INFO msg="leader election lease released at stop" operator=ip`}, []string{"level=ERROR"}},
		{"stopping, warn level", true, slog.LevelWarn, lost, nil, []string{"leader election"}},
		{"running", false, slog.LevelInfo, lost, []string{`level=ERROR msg="` + stopMessage + `" operator=ip err="leader election lost"`}, nil},
		{"another error while stopping", true, slog.LevelInfo, errors.New("boom"), []string{`level=ERROR msg="` + stopMessage + `" operator=ip err=boom`}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			h := slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: c.level})
			log := logr.FromSlogHandler(stopNoise{Handler: h, stopping: func() bool { return c.stopping }}).WithValues("operator", "ip")
			log.Error(c.err, stopMessage)
			for _, w := range c.want {
				if !strings.Contains(buf.String(), w) {
					t.Errorf("log lacks %q:\n%s", w, buf.String())
				}
			}
			for _, w := range c.wantNot {
				if strings.Contains(buf.String(), w) {
					t.Errorf("log has %q:\n%s", w, buf.String())
				}
			}
		})
	}
}
