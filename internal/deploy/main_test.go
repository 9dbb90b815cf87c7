package deploy

import (
	"testing"

	"berth.dev/berth/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
