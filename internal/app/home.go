package app

import (
	"os"
	"path/filepath"
)

// DefaultHome is berth's home unless told otherwise: $BERTH_HOME, else ~/.berth (what
// every berth command reads its keyring and node address from).
func DefaultHome() string {
	if h := os.Getenv("BERTH_HOME"); h != "" {
		return h
	}
	if d, err := os.UserHomeDir(); err == nil {
		return filepath.Join(d, ".berth")
	}
	return ".berth"
}
