#!/bin/bash
# gpu_price.sh is a pricing script for berth's tests. It prices GPUs the way Akash's
# price_script_generic.sh (akash-network/helm-charts, charts/akash-provider/scripts)
# documents it: PRICE_TARGET_GPU_MAPPINGS is a comma-separated list of key=price, a key
# being <model>[.<ram>][.<interface>] built from what stdin holds under
# .resources[].gpu.attributes.vendor.(nvidia|amd); a key without a price falls back to
# the key without its last part, then to the model alone, then to the highest price of
# the list. It prints Σ count × gpu units × price, with price_precision decimals; it
# reads nothing else (no CPU, memory, storage or currency conversion).
set -euo pipefail

in=$(cat)

declare -A price=()
highest=0
IFS=',' read -ra pairs <<<"${PRICE_TARGET_GPU_MAPPINGS:-}"
for pair in "${pairs[@]}"; do
	key=${pair%%=*} value=${pair#*=}
	if [[ -z $key || $key == "$pair" || ! $value =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
		echo "PRICE_TARGET_GPU_MAPPINGS: $pair is not <key>=<price>" >&2
		exit 1
	fi
	price[$key]=$value
	if [[ $(bc <<<"$value > $highest") == 1 ]]; then
		highest=$value
	fi
done

total=0
while IFS=$'\t' read -r count units model ram iface; do
	[[ $units == 0 ]] && continue
	key=$model
	[[ -n $ram ]] && key+=".$ram"
	[[ -n $iface ]] && key+=".$iface"
	rate=${price[$key]:-${price[${key%.*}]:-${price[${key%%.*}]:-$highest}}}
	echo "gpu $key: $count × $units × $rate" >&2
	total=$(bc <<<"$total + $count * $units * $rate")
done < <(jq -r '.resources[]
	| (.gpu.attributes.vendor // {} | .nvidia // .amd // {}) as $g
	| [.count, .gpu.units, ($g.model // ""), ($g.ram // ""), ($g.interface // "")]
	| @tsv' <<<"$in")

printf '%.*f\n' "$(jq -r '.price_precision // 6' <<<"$in")" "$total"
