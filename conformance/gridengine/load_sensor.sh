#!/bin/sh
# Load sensor (sge_conf(5) load_sensor) of the referee: reports the values of
# /var/lib/jobmatch-conformance/loads ("host:name:value" lines) for this host and global.
FILE=${JOBMATCH_CONFORMANCE_STATE:-/var/lib/jobmatch-conformance}/loads
HOST=$(hostname)
while read -r line; do
    [ "$line" = quit ] && exit 0
    echo begin
    if [ -r "$FILE" ]; then
        while IFS=: read -r h n v; do
            if [ "$h" = "$HOST" ] || [ "$h" = global ]; then echo "$h:$n:$v"; fi
        done < "$FILE"
    fi
    echo end
done
