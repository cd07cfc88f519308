"""Generate the stage-6 toy English -> Spanish translation set (deterministic).

    python assignments/a06_decoder/data/make_toy_translation.py

writes toy_translation.tsv next to this script: one pair per line,
``split<TAB>english<TAB>spanish``, split being ``train`` or ``heldout``.

The sentences come from a handful of templates (subject + verb + object,
adjective after the noun in Spanish, "let's go ..." as in the lecture's
"Let's go" -> "vamos" example, slides 10, 28, 51). Every word of the
held-out pairs also appears in the training pairs: a held-out pair is a new
*combination* of known words, so a model that learned the templates and the
word alignments translates it exactly. Same script, same file, every time
(fixed seed, no dependency beyond the standard library).
"""
from __future__ import annotations

import random
from pathlib import Path

SEED = 6
N_ADJ_OBJECT = 700       # sampled from the subject x verb x adjective x noun grid
HELDOUT_FRACTION = 0.1

# English subject, Spanish subject, index into a verb's conjugation row
SUBJECTS = [("i", "yo", 0), ("you", "tú", 1), ("he", "él", 2), ("she", "ella", 2),
            ("we", "nosotros", 3), ("they", "ellos", 4)]
# English base form, 3rd-person singular, Spanish present: yo, tú, él/ella, nosotros, ellos
VERBS = [("see", "sees", ["veo", "ves", "ve", "vemos", "ven"]),
         ("want", "wants", ["quiero", "quieres", "quiere", "queremos", "quieren"]),
         ("have", "has", ["tengo", "tienes", "tiene", "tenemos", "tienen"]),
         ("buy", "buys", ["compro", "compras", "compra", "compramos", "compran"]),
         ("need", "needs", ["necesito", "necesitas", "necesita", "necesitamos", "necesitan"])]
GO = ("go", "goes", ["voy", "vas", "va", "vamos", "van"])
# English noun, Spanish noun, grammatical gender
NOUNS = [("car", "coche", "m"), ("book", "libro", "m"), ("dog", "perro", "m"),
         ("cat", "gato", "m"), ("bread", "pan", "m"), ("hat", "sombrero", "m"),
         ("house", "casa", "f"), ("table", "mesa", "f"), ("apple", "manzana", "f"),
         ("door", "puerta", "f"), ("letter", "carta", "f"), ("ball", "pelota", "f")]
# English adjective, Spanish masculine, Spanish feminine
ADJECTIVES = [("red", "rojo", "roja"), ("white", "blanco", "blanca"), ("black", "negro", "negra"),
              ("new", "nuevo", "nueva"), ("old", "viejo", "vieja"), ("small", "pequeño", "pequeña"),
              ("big", "grande", "grande"), ("green", "verde", "verde")]
# places for "let's go to the ...": English, Spanish with its preposition+article
PLACES = [("beach", "a la playa"), ("park", "al parque"), ("market", "al mercado"),
          ("school", "a la escuela"), ("station", "a la estación"), ("cinema", "al cine"),
          ("city", "a la ciudad"), ("river", "al río")]

DEFINITE = {"m": "el", "f": "la"}
INDEFINITE = {"m": "un", "f": "una"}


def conjugate(subject, verb):
    en_subj, es_subj, person = subject
    base, third, forms = verb
    en_verb = third if en_subj in ("he", "she") else base
    return f"{en_subj} {en_verb}", f"{es_subj} {forms[person]}"


def all_pairs(rng):
    pairs = []
    # "let's go" family (slides 10, 28, 51)
    pairs.append(("let's go", "vamos"))
    pairs.append(("let's go now", "vamos ahora"))
    pairs.append(("let's go home", "vamos a casa"))
    for en, es in PLACES:
        pairs.append((f"let's go to the {en}", f"vamos {es}"))
        pairs.append((f"let's go to the {en} now", f"vamos {es} ahora"))
    # subject goes to the place (now)
    for subject in SUBJECTS:
        en_sv, es_sv = conjugate(subject, GO)
        for en, es in PLACES:
            pairs.append((f"{en_sv} to the {en}", f"{es_sv} {es}"))
            pairs.append((f"{en_sv} to the {en} now", f"{es_sv} {es} ahora"))
    # subject verb the/a noun
    for subject in SUBJECTS:
        for verb in VERBS:
            en_sv, es_sv = conjugate(subject, verb)
            for en_n, es_n, g in NOUNS:
                pairs.append((f"{en_sv} the {en_n}", f"{es_sv} {DEFINITE[g]} {es_n}"))
                pairs.append((f"{en_sv} a {en_n}", f"{es_sv} {INDEFINITE[g]} {es_n}"))
    # the noun is (not) adjective
    for en_n, es_n, g in NOUNS:
        for en_a, es_m, es_f in ADJECTIVES:
            es_a = es_m if g == "m" else es_f
            pairs.append((f"the {en_n} is {en_a}", f"{DEFINITE[g]} {es_n} es {es_a}"))
            pairs.append((f"the {en_n} is not {en_a}", f"{DEFINITE[g]} {es_n} no es {es_a}"))
    # subject verb the adjective noun -> noun adjective (reordering, agreement)
    grid = [(s, v, a, n) for s in SUBJECTS for v in VERBS for a in ADJECTIVES for n in NOUNS]
    for subject, verb, (en_a, es_m, es_f), (en_n, es_n, g) in rng.sample(grid, N_ADJ_OBJECT):
        en_sv, es_sv = conjugate(subject, verb)
        es_a = es_m if g == "m" else es_f
        pairs.append((f"{en_sv} the {en_a} {en_n}", f"{es_sv} {DEFINITE[g]} {es_n} {es_a}"))
    return pairs


def split(pairs, rng):
    """Shuffle, hold out a fraction; the lecture example always stays in train
    and every held-out word must occur in train (else it moves to train)."""
    order = list(pairs)
    rng.shuffle(order)
    n_heldout = round(HELDOUT_FRACTION * len(order))
    heldout, train = order[:n_heldout], order[n_heldout:]
    keep = [p for p in heldout if p[0] == "let's go"]
    heldout = [p for p in heldout if p[0] != "let's go"]
    train += keep
    while True:
        seen_en = {w for en, _ in train for w in en.split()}
        seen_es = {w for _, es in train for w in es.split()}
        unseen = [p for p in heldout
                  if not set(p[0].split()) <= seen_en or not set(p[1].split()) <= seen_es]
        if not unseen:
            return train, heldout
        train += unseen
        heldout = [p for p in heldout if p not in unseen]


def main():
    rng = random.Random(SEED)
    train, heldout = split(all_pairs(rng), rng)
    out = Path(__file__).with_name("toy_translation.tsv")
    with out.open("w", encoding="utf-8", newline="\n") as f:
        for name, rows in (("train", train), ("heldout", heldout)):
            for en, es in rows:
                f.write(f"{name}\t{en}\t{es}\n")
    print(f"wrote {out}: {len(train)} train, {len(heldout)} held-out pairs")


if __name__ == "__main__":
    main()
