"""Build the stage-7 MLM corpus and its word-level tokenizer.

The corpus is generated here from a small grammar (no outside text, so no
licence question): short lower-case English sentences whose words can be
recovered from their context, in both directions, the way BERT's masked
language model must (slide 58). Some facts are fixed (a dog says "woof",
after monday comes tuesday, a banana is yellow, paris is the capital of
france); others follow agreement rules (he/she after a name, "runs" after a
singular subject, "great" after "love" but "awful" after "hate"); the
lecture's own examples (slides 62, 66) are in too: "pizza is great",
"my cellphone is broken , great".

What it writes (deterministic; run it again and you get the same bytes):

    mlm_train.txt    TRAIN_SIZE distinct sentences, one per line
    mlm_valid.txt    VALID_SIZE distinct held-out sentences (none is in train)
    tokenizer.json   a `tokenizers` WordLevel tokenizer over every corpus word:
                     ids 0-4 = [PAD] [UNK] [CLS] [SEP] [MASK], then the words
                     in alphabetical order; lower-cases, splits on whitespace and
                     punctuation, wraps each sentence as [CLS] ... [SEP], pads a
                     batch to its longest sentence with [PAD] (id 0).

Usage: ``python assignments/a07_bert_mlm/data/make_corpus.py``
"""

from __future__ import annotations

import random
from pathlib import Path

SEED = 7
TRAIN_SIZE = 4000
VALID_SIZE = 500
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
HERE = Path(__file__).resolve().parent

NUMBERS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen "
           "fourteen fifteen sixteen seventeen eighteen nineteen twenty").split()
DAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
MONTHS = ("january february march april may june july august september october "
          "november december").split()
SOUNDS = {"dog": "woof", "cat": "meow", "cow": "moo", "duck": "quack", "sheep": "baa",
          "lion": "roar", "owl": "hoot", "frog": "croak", "horse": "neigh", "pig": "oink"}
PLURALS = {"dog": "dogs", "cat": "cats", "cow": "cows", "duck": "ducks", "sheep": "sheep",
           "lion": "lions", "owl": "owls", "frog": "frogs", "horse": "horses", "pig": "pigs"}
VERBS = {"runs": "run", "sleeps": "sleep", "eats": "eat", "plays": "play", "waits": "wait", "sits": "sit"}
PLACES = "garden park field barn house yard forest river".split()
COLOURS = {"banana": "yellow", "lemon": "yellow", "apple": "red", "cherry": "red",
           "strawberry": "red", "lime": "green", "pear": "green", "plum": "purple",
           "grape": "purple", "orange": "orange", "blueberry": "blue", "coconut": "brown"}
CAPITALS = {"paris": "france", "rome": "italy", "berlin": "germany", "madrid": "spain",
            "tokyo": "japan", "seoul": "korea", "cairo": "egypt", "lima": "peru",
            "ottawa": "canada", "oslo": "norway", "athens": "greece", "lisbon": "portugal"}
OPPOSITES = {"hot": "cold", "big": "small", "fast": "slow", "happy": "sad", "old": "new",
             "high": "low", "light": "dark", "early": "late", "open": "closed", "full": "empty",
             "wet": "dry", "loud": "quiet"}
TOOLS = {"chef": "knife", "painter": "brush", "writer": "pen", "farmer": "tractor",
         "doctor": "stethoscope", "carpenter": "hammer", "gardener": "shovel", "pilot": "plane",
         "fisher": "net", "teacher": "chalk"}
WEATHER = {"rainy": "umbrella", "sunny": "sunglasses", "cold": "coat", "snowy": "boots", "windy": "scarf"}
MEN = "tom james david peter sam paul mark john leo ben".split()
WOMEN = "anna maria sarah emma lucy kate julia mia sofia nora".split()
FOODS = "pizza pasta soup cake bread salad rice coffee tea curry steak pie".split()
GOOD = "great awesome delicious wonderful amazing tasty".split()
BAD = "awful terrible disgusting horrible bland bad".split()
FEELINGS = "happy tired hungry sad busy sleepy".split()
THINGS = "cellphone laptop car bike watch camera radio".split()


def _sentences(rng: random.Random):
    """An endless stream of sentences, one template chosen at random each time."""
    def name_pronoun():
        if rng.random() < 0.5:
            return rng.choice(MEN), "he", "his"
        return rng.choice(WOMEN), "she", "her"

    def animal_sound():
        animal = rng.choice(list(SOUNDS))
        return f"the {animal} says {SOUNDS[animal]}"

    def animal_agreement():
        animal, verb = rng.choice(list(SOUNDS)), rng.choice(list(VERBS))
        place = rng.choice(PLACES)
        if rng.random() < 0.5:
            return f"the {animal} {verb} in the {place}"
        return f"the {PLURALS[animal]} {VERBS[verb]} in the {place}" if animal != "sheep" else \
            f"two sheep {VERBS[verb]} in the {place}"

    def days():
        i = rng.randrange(7)
        if rng.random() < 0.5:
            return f"after {DAYS[i]} comes {DAYS[(i + 1) % 7]}"
        return f"the day before {DAYS[i]} is {DAYS[i - 1]}"

    def months():
        i = rng.randrange(12)
        return f"{MONTHS[(i + 1) % 12]} comes after {MONTHS[i]}"

    def counting():
        a = rng.randrange(19)
        b = rng.randrange(1, 21 - a)
        if rng.random() < 0.5:
            return f"{NUMBERS[a]} plus {NUMBERS[b]} is {NUMBERS[a + b]}"
        start = rng.randrange(18)
        return "count with me : " + " ".join(NUMBERS[start:start + 3])

    def colours():
        fruit = rng.choice(list(COLOURS))
        article = "an" if fruit[0] in "aeiou" else "a"
        return rng.choice([f"the {fruit} is {COLOURS[fruit]}",
                           f"{article} ripe {fruit} is {COLOURS[fruit]}",
                           f"i ate a {COLOURS[fruit]} {fruit} today"])

    def capitals():
        city = rng.choice(list(CAPITALS))
        return rng.choice([f"{city} is the capital of {CAPITALS[city]}",
                           f"the capital of {CAPITALS[city]} is {city}"])

    def opposites():
        word = rng.choice(list(OPPOSITES))
        a, b = (word, OPPOSITES[word]) if rng.random() < 0.5 else (OPPOSITES[word], word)
        return f"the opposite of {a} is {b}"

    def tools():
        job = rng.choice(list(TOOLS))
        name, he, _ = name_pronoun()
        return rng.choice([f"the {job} uses a {TOOLS[job]}",
                           f"{name} is a {job} so {he} needs a {TOOLS[job]}"])

    def weather():
        kind = rng.choice(list(WEATHER))
        name, he, his = name_pronoun()
        return f"it is {kind} today so {name} takes {his} {WEATHER[kind]}"

    def feelings():
        name, he, _ = name_pronoun()
        return f"{name} said that {he} was {rng.choice(FEELINGS)}"

    def food_opinion():
        food = rng.choice(FOODS)
        name, he, _ = name_pronoun()
        if rng.random() < 0.5:
            return rng.choice([f"i love the {food} , it is {rng.choice(GOOD)}",
                               f"{food} is {rng.choice(GOOD)} , {name} loves it",
                               f"{name} says the {food} is {rng.choice(GOOD)}"])
        return rng.choice([f"i hate the {food} , it is {rng.choice(BAD)}",
                           f"{food} is {rng.choice(BAD)} , {name} hates it",
                           f"{name} says the {food} is {rng.choice(BAD)}"])

    def broken_things():  # slide 66: "great" in a sarcastic context
        thing = rng.choice(THINGS)
        return rng.choice([f"my {thing} is broken , great", f"my {thing} is broken again , great",
                           f"the new {thing} works , great", f"pizza is {rng.choice(GOOD)} !"])

    templates = [animal_sound, animal_agreement, days, months, counting, colours, capitals,
                 opposites, tools, weather, feelings, food_opinion, broken_things]
    while True:
        yield rng.choice(templates)()


def build_corpus(seed: int = SEED, n_train: int = TRAIN_SIZE, n_valid: int = VALID_SIZE):
    """(train, valid): lists of distinct sentences; no valid sentence is in train."""
    rng = random.Random(seed)
    seen, ordered = set(), []
    for sentence in _sentences(rng):
        if sentence not in seen:
            seen.add(sentence)
            ordered.append(sentence)
        if len(ordered) == n_train + n_valid:
            break
    rng.shuffle(ordered)
    return ordered[:n_train], ordered[n_train:]


def build_tokenizer(sentences):
    """A WordLevel `tokenizers.Tokenizer` over the words of `sentences` (ids 0-4 are SPECIALS)."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordLevel

    pre = pre_tokenizers.Whitespace()
    words = sorted({w for s in sentences for w, _ in pre.pre_tokenize_str(s.lower())})
    vocab = {token: i for i, token in enumerate(SPECIALS + words)}
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    tok.enable_padding(pad_id=vocab["[PAD]"], pad_token="[PAD]")
    return tok


def main() -> None:
    train, valid = build_corpus()
    (HERE / "mlm_train.txt").write_text("\n".join(train) + "\n", encoding="utf-8")
    (HERE / "mlm_valid.txt").write_text("\n".join(valid) + "\n", encoding="utf-8")
    tok = build_tokenizer(train + valid)
    tok.save(str(HERE / "tokenizer.json"), pretty=True)
    print(f"{len(train)} train, {len(valid)} valid sentences; vocabulary {tok.get_vocab_size()} tokens")


if __name__ == "__main__":
    main()
