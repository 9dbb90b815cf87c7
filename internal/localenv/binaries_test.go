package localenv

import (
	"strings"
	"testing"
)

// TestBuildBinariesReuses: with the binaries built, BuildBinaries runs hack/testbin.sh,
// shows its progress, and returns the directory FindBinaries finds.
func TestBuildBinariesReuses(t *testing.T) {
	want, err := FindBinaries(t.Context())
	requireDep(t, err)
	t.Setenv(BinDirEnv, "") // as berth dev calls it: from the source tree's script
	var progress strings.Builder
	got, err := BuildBinaries(t.Context(), &progress)
	if err != nil {
		t.Fatalf("BuildBinaries: %v\n%s", err, progress.String())
	}
	if got != want || !strings.Contains(progress.String(), "testbin: reusing") {
		t.Fatalf("BuildBinaries = %s (progress %q), want %s", got, progress.String(), want)
	}
}
