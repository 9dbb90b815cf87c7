package bidengine

import (
	"testing"

	"berth.dev/berth/internal/testenv"
)

// TestMain stops the shared test cluster and checks for leaked goroutines.
func TestMain(m *testing.M) { testenv.Main(m) }
