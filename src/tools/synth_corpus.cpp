// Training text for the synth tokenizer. Written for ds-server; free to change (a change
// changes the demo vocabulary, nothing else).
#include "tools/synth_corpus.h"

namespace ds::cli {

std::string_view synth_bpe_corpus() {
  return R"CORPUS(The server reads a model file, maps it into memory and answers requests over HTTP.
Each request carries a prompt. The prompt is split into tokens, the tokens are fed to the
model, and the model returns a score for every token in the vocabulary. The server picks the
next token from those scores, appends it to the text, and repeats until the answer is done.

A model is a stack of layers. Every layer reads the stream of numbers that flows through the
model, mixes information between positions with attention, and then transforms each position
on its own with a feed forward network. Some models replace the feed forward network with a
mixture of experts: a small router looks at each token and sends it to a few of many experts,
so that only a small part of the weights is read for every token. This is why a very large
model can still answer quickly on a machine with enough memory.

Attention needs the keys and values of every earlier position. The server keeps them in a
cache that grows with the conversation. The cache is split into blocks of a fixed size, so that
many conversations can share the memory without copying, and a finished conversation returns
its blocks to the pool. When the pool runs out, the server waits, or it tells the client that
the request cannot be served right now.

Weights are stored in blocks of numbers with a shared scale. A block of thirty two numbers may
keep only four or five bits for each number and one small scale for the whole block. Reading
fewer bytes makes the model faster, because the processor spends most of its time waiting for
memory. The price is a small error in every weight, and good quantization keeps that error low
by choosing the scale and the offset of each block with care.

The scheduler decides which requests run in the next step. New prompts are processed in
chunks, so that one long prompt does not stall everyone else, and running requests produce one
new token per step. Requests that arrive together are batched, and the batch is sent through
the model at once. A good scheduler is fair, fast and simple, and it is easy to test because it
only moves plain data around.

Questions and answers:
User: What is the capital of France?
Assistant: The capital of France is Paris.
User: How many days are there in a week?
Assistant: There are seven days in a week.
User: Write a short poem about the sea.
Assistant: The sea is wide, the sea is deep, it sings the harbor lights to sleep.
User: What is two plus two?
Assistant: Two plus two is four.

Numbers: 0 1 2 3 4 5 6 7 8 9 10 11 12 16 20 32 42 64 100 128 256 512 1000 1024 2048 4096
2024 2025 2026 3.14159 2.71828 1.5 0.5 0.25 -1 -2 100% 50% 12:30 1st 2nd 3rd 4th

def add(a, b):
    return a + b

for i in range(10):
    print(i, add(i, i))

int main(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    printf("%s\n", argv[i]);
  }
  return 0;
}

{"model": "demo", "messages": [{"role": "user", "content": "Hello!"}], "stream": true}

The quick brown fox jumps over the lazy dog. The lazy dog sleeps in the sun while the fox runs
through the field. Children play in the garden, birds sing in the trees, and the wind moves the
leaves. In the evening the family eats dinner together and talks about the day. Tomorrow they
will travel to the city to visit their friends, and they will come back home on the weekend.

Good software is written for the people who read it. Names say what things are, functions do
one thing, and every error message tells the user what went wrong and what to do about it.
Tests check the behavior that matters, and they fail when something is broken. When a program
is fast, it is because someone measured it, found the slow part, and made that part faster.
)CORPUS";
}

}  // namespace ds::cli
