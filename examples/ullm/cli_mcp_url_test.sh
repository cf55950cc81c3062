#!/bin/sh
# `ullm chat --mcp-url`: starts the reference server-everything in Streamable HTTP mode on a free
# port of 127.0.0.1, lists the chat's tools through it, and stops the server.
# Usage: cli_mcp_url_test.sh ULLM NODE EVERYTHING_JS WORKDIR
set -eu
ullm=$1 node=$2 everything=$3 work=$4
port=$("$node" -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
PORT=$port "$node" "$everything" streamableHttp >/dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
"$node" -e "
const net = require('net');
const give_up = Date.now() + 20000;
(function attempt() {
  const socket = net.connect($port, '127.0.0.1', () => { socket.end(); process.exit(0); });
  socket.on('error', () => Date.now() > give_up ? process.exit(1) : setTimeout(attempt, 50));
})();"
printf '/tools\n' | "$ullm" chat --offline --store "$work/cli_mcp_url.db" --mcp-url "http://127.0.0.1:$port/mcp"
