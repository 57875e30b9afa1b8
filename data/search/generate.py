#!/usr/bin/env python3
"""Writes the toy retrieval corpus and questions for the `search` environment
(toy_corpus.jsonl, toy_questions.jsonl), served by `skyrl retrieval-serve`
(docs/search.md).

The corpus is in Search-R1's wiki-18 format, one passage a line:
`{"id": "0", "contents": "\"Title\"\ntext"}`. The passages are short, written
for this file, and include near misses (Sydney for the capital of Australia,
Kyoto for Japan's, the Seine for London's river) so that retrieval has to rank.

The questions follow skyrl's SearchR1 preprocessing
(examples/search/searchr1_dataset.py): a system message, the Search-R1
instruction plus the question as the user message, `env_class` "search", the
accepted answers in `reward_spec.ground_truth.target`, and the question in
`extra_info`. Every question's answer is in a passage this file also writes
(checked below, and by host/retrieval/tests/http.rs against the BM25 ranking).

Deterministic: the same script always writes byte-identical files.

    python3 data/search/generate.py
"""

import json
import os

SYSTEM = "You are a helpful and harmless assistant."
INSTRUCTION = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> "
    "first every time you get new information. After reasoning, if you find you lack "
    "some knowledge, you can call a search engine by <search> query </search> "
    "and it will return the top searched results between <information> and "
    "</information>. You can search as many times as you want. If you find no "
    "further external knowledge needed, you can directly provide the answer inside "
    "<answer> and </answer>, without detailed illustrations. For example, "
    "<answer> Beijing </answer>. Question: "
)

# (title, text)
PASSAGES = [
    ("Paris", "Paris is the capital of France and its most populous city. It lies on the Seine in the north of the country."),
    ("Lyon", "Lyon is a city in east-central France at the meeting of the Rhone and the Saone. It is known for its cooking and its silk trade."),
    ("Marseille", "Marseille is a port city on the Mediterranean coast of France and one of the oldest cities in the country."),
    ("Seine", "The Seine is a river in northern France. It flows through Paris and reaches the English Channel at Le Havre."),
    ("Thames", "The River Thames flows through southern England and through London, the capital of the United Kingdom, before it reaches the North Sea."),
    ("London", "London is the capital of England and of the United Kingdom. The city grew up around a crossing of the River Thames."),
    ("Nile", "The Nile is the longest river in Africa. It flows north through eleven countries, including Uganda, Sudan and Egypt, into the Mediterranean Sea."),
    ("Congo River", "The Congo River in central Africa is the deepest river in the world and the second longest river in Africa after the Nile."),
    ("Amazon River", "The Amazon River in South America carries more water than any other river. It flows east across Brazil to the Atlantic Ocean."),
    ("Danube", "The Danube is the second longest river in Europe. It flows from Germany to the Black Sea, passing Vienna, Budapest and Belgrade."),
    ("Mississippi River", "The Mississippi River is the main river of the largest drainage basin in North America and flows south to the Gulf of Mexico."),
    ("Canberra", "Canberra is the capital city of Australia. It was chosen as a compromise between Sydney and Melbourne and was built as a planned city from 1913."),
    ("Sydney", "Sydney is the largest city in Australia and the capital of the state of New South Wales. Its harbour is home to a famous opera house."),
    ("Melbourne", "Melbourne is the capital of the Australian state of Victoria and the second largest city in Australia."),
    ("Tokyo", "Tokyo is the capital of Japan and the seat of its government. The city was called Edo before 1868."),
    ("Kyoto", "Kyoto was the imperial capital of Japan for more than a thousand years. It is famous for its temples and gardens."),
    ("Osaka", "Osaka is a large port city in the Kansai region of Japan, known for its street food and merchant history."),
    ("Ottawa", "Ottawa is the capital city of Canada. It stands on the Ottawa River in the province of Ontario."),
    ("Toronto", "Toronto is the largest city in Canada and the capital of the province of Ontario, on the shore of Lake Ontario."),
    ("Berlin", "Berlin is the capital and largest city of Germany. The Berlin Wall divided the city from 1961 to 1989."),
    ("Madrid", "Madrid is the capital of Spain and lies near the geographic centre of the Iberian Peninsula."),
    ("Rome", "Rome is the capital of Italy. It was the centre of the Roman Empire and contains Vatican City."),
    ("Alexander Graham Bell", "Alexander Graham Bell was a Scottish-born inventor who is credited with inventing the telephone. He received the first United States patent for the telephone in 1876."),
    ("Telephone", "The telephone turns sound into electrical signals and back so that people can talk over a distance. Alexander Graham Bell made the first successful call in 1876."),
    ("Samuel Morse", "Samuel Morse helped develop the electric telegraph and co-invented Morse code, a system of dots and dashes for sending messages over wires."),
    ("Guglielmo Marconi", "Guglielmo Marconi was an Italian engineer who pioneered long-distance radio transmission and shared the 1909 Nobel Prize in Physics."),
    ("Thomas Edison", "Thomas Edison was an American inventor who developed the phonograph, a practical electric light bulb and early motion picture cameras."),
    ("Johannes Gutenberg", "Johannes Gutenberg was a German goldsmith who introduced printing with movable metal type to Europe around 1440. His printing press made books far cheaper."),
    ("Printing press", "A printing press applies pressure to an inked surface resting on paper. The movable type printing press developed by Johannes Gutenberg spread across Europe within decades."),
    ("Bi Sheng", "Bi Sheng was a Chinese artisan who made movable type from baked clay during the Song dynasty, centuries before printing with metal type began in Europe."),
    ("Wright brothers", "Orville and Wilbur Wright built and flew the first successful powered airplane at Kitty Hawk, North Carolina, in 1903."),
    ("Tim Berners-Lee", "Tim Berners-Lee is an English computer scientist who invented the World Wide Web in 1989 while working at CERN."),
    ("Marie Curie", "Marie Curie was a physicist and chemist who studied radioactivity. She was the first person to win Nobel Prizes in two sciences."),
    ("Jupiter", "Jupiter is the largest planet in the Solar System. It is a gas giant with a mass more than twice that of all the other planets combined."),
    ("Saturn", "Saturn is the second largest planet in the Solar System and is best known for its bright system of rings."),
    ("Mars", "Mars is the fourth planet from the Sun. Iron oxide on its surface gives it a reddish colour, so it is called the Red Planet."),
    ("Jane Austen", "Jane Austen was an English novelist who wrote Pride and Prejudice, published in 1813, as well as Sense and Sensibility and Emma."),
    ("Pride and Prejudice", "Pride and Prejudice is a novel by Jane Austen that follows Elizabeth Bennet and her quarrels with the proud Mr Darcy."),
    ("Charles Dickens", "Charles Dickens was an English writer of the Victorian era whose novels include Oliver Twist, David Copperfield and Great Expectations."),
    ("Emily Bronte", "Emily Bronte was an English novelist and poet, best known for her only novel, Wuthering Heights, published in 1847."),
    ("Mount Everest", "Mount Everest, on the border of Nepal and China, is the highest mountain on Earth above sea level, at about 8,849 metres."),
    ("K2", "K2, on the border of Pakistan and China, is the second highest mountain on Earth and is known as one of the hardest to climb."),
    ("Mount Kilimanjaro", "Mount Kilimanjaro in Tanzania is the highest mountain in Africa and a dormant volcano with three cones."),
]

# (question, accepted answers)
QUESTIONS = [
    ("What is the capital of France?", ["Paris"]),
    ("Who invented the telephone?", ["Alexander Graham Bell", "Graham Bell"]),
    ("What is the longest river in Africa?", ["Nile", "the Nile", "Nile River"]),
    ("What is the capital city of Australia?", ["Canberra"]),
    ("Who introduced printing with movable metal type to Europe?", ["Johannes Gutenberg", "Gutenberg"]),
    ("Which river flows through London?", ["Thames", "River Thames", "the Thames"]),
    ("What is the largest planet in the Solar System?", ["Jupiter"]),
    ("Who wrote the novel Pride and Prejudice?", ["Jane Austen"]),
    ("What is the highest mountain on Earth?", ["Mount Everest", "Everest"]),
    ("What is the capital of Japan?", ["Tokyo"]),
]


def contents(title, text):
    return f'"{title}"\n{text}'


def question_row(index, question, targets):
    return {
        "data_source": "searchR1_toy",
        "prompt": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": INSTRUCTION + question},
        ],
        "env_class": "search",
        "reward_spec": {"method": "rule", "ground_truth": {"target": targets}},
        "extra_info": {"split": "test", "index": index, "question": question},
    }


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    texts = [contents(t, x) for t, x in PASSAGES]
    for question, targets in QUESTIONS:
        assert any(targets[0] in text for text in texts), f"no passage answers {question!r}"
    write_jsonl(
        os.path.join(here, "toy_corpus.jsonl"),
        ({"id": str(i), "contents": text} for i, text in enumerate(texts)),
    )
    write_jsonl(
        os.path.join(here, "toy_questions.jsonl"),
        (question_row(i, q, targets) for i, (q, targets) in enumerate(QUESTIONS)),
    )
    print(f"wrote {len(texts)} passages and {len(QUESTIONS)} questions to {here}")


if __name__ == "__main__":
    main()
