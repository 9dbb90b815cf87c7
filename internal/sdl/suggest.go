package sdl

import "strings"

// suggest returns the known key closest to key when it looks like a typo of it: at most
// two edits away (a swap of neighbours counts as one), and fewer than half its length.
func suggest(key string, known []string) string {
	best, bestDist := "", 3
	lk := strings.ToLower(key)
	for _, k := range known {
		if d := editDistance(lk, strings.ToLower(k)); d < bestDist {
			best, bestDist = k, d
		}
	}
	if best == "" || 2*bestDist >= len([]rune(key)) {
		return ""
	}
	return best
}

// editDistance is the optimal-string-alignment distance between a and b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 64 || len(rb) > 64 {
		return 1 << 30 // not a typo of a known key
	}
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
