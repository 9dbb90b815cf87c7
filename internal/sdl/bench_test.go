package sdl

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkCorpus reads every corpus file Akash accepts, all the way to groups, manifest
// and version hash, and reports the median and 95th percentile of the time per file
// (each file's mean over the benchmark's iterations). See docs/benchmarks.md.
func BenchmarkCorpus(b *testing.B) {
	var files [][]byte
	cases := loadCorpus(b)
	for i := range cases {
		if cases[i].expected.Error == "" {
			files = append(files, cases[i].input)
		}
	}
	perFile := make([]time.Duration, len(files))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for i, f := range files {
			start := time.Now()
			res, _, err := Parse(f, Options{})
			perFile[i] += time.Since(start)
			if err != nil || len(res.Version) == 0 {
				b.Fatalf("file %d: %v", i, err)
			}
		}
	}
	b.StopTimer()
	slices.Sort(perFile)
	ms := func(d time.Duration) float64 { return float64(d) / float64(b.N) / float64(time.Millisecond) }
	b.ReportMetric(ms(perFile[len(perFile)/2]), "median-ms/file")
	b.ReportMetric(ms(perFile[len(perFile)*95/100]), "p95-ms/file")
	b.ReportMetric(float64(len(files)), "files")
}
