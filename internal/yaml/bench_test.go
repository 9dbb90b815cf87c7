package yaml

import (
	"testing"

	yamlv3 "go.yaml.in/yaml/v3"
)

// BenchmarkParseCorpus and BenchmarkYAMLv3Corpus parse the same SDL corpus files into
// node trees, with this package and with yaml.v3 (what Akash uses).
func BenchmarkParseCorpus(b *testing.B) {
	inputs := corpusInputs(b)
	b.ReportAllocs()
	for b.Loop() {
		for _, data := range inputs {
			if _, err := Parse(data); err != nil && len(data) > 1<<20 {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(inputs))/1000, "µs/file")
}

func BenchmarkYAMLv3Corpus(b *testing.B) {
	inputs := corpusInputs(b)
	b.ReportAllocs()
	for b.Loop() {
		for _, data := range inputs {
			var n yamlv3.Node
			_ = yamlv3.Unmarshal(data, &n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(inputs))/1000, "µs/file")
}
